// attnlab report: one self-contained HTML page of one or more runs (or of a
// sweep directory), drawn in the browser from the runs' own files.
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "cli/report.h"

#include "cli/command_line.h"
#include "attnlab_report_assets.h"  // generated from the page in cli/report/ (CMakeLists.txt)
#include "cli/report_data.h"
#include "framework/error.h"
#include "framework/io/atomic_file.h"
#include "training/run_dir/claim.h"

namespace attnlab::cli {

namespace fs = std::filesystem;

namespace {

// The mark of a page attnlab wrote (in cli/report/report.html): only such a
// file is replaced without --overwrite.
constexpr const char* kReportMark = "<meta name=\"generator\" content=\"attnlab report\">";

bool is_own_report(const std::string& path) {
  try {
    InputFile file(path, "report");
    return file.read(std::min<uint64_t>(file.size(), 4096)).find(kReportMark) != std::string::npos;
  } catch (const IoError&) {
    return false;
  }
}

// ValueError unless `out` may be written: new, attnlab's own report, or any
// regular file with --overwrite; never a symlink, a directory or a device.
void check_out_file(const std::string& out, bool overwrite) {
  const std::string refuses = "--out refuses to write '" + out + "': ";
  if (std::string why = protected_path_reason(out); !why.empty()) throw ValueError(refuses + "it is " + why);
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(out, ec);
  if (!fs::exists(status)) return;
  if (fs::is_symlink(status)) throw ValueError(refuses + "it is a symbolic link (attnlab does not write through one)");
  if (!fs::is_regular_file(status)) throw ValueError(refuses + "it is not a regular file");
  if (!overwrite && !is_own_report(out))
    throw ValueError(refuses + "it exists and is not an attnlab report; pass --overwrite to replace it");
}

// scripts/tools/sweep.py's output: DIR/summary.csv and one run directory per point.
bool is_sweep(const std::string& dir) {
  std::error_code ec;
  return !fs::exists(fs::path(dir) / "config.ini", ec) && fs::is_regular_file(fs::path(dir) / "summary.csv", ec);
}

// The sweep's table and its points' runs; a point whose run cannot be read
// (it failed, or is still running) is named on stderr and left out.
nlohmann::json sweep_data(const std::string& dir, const std::vector<std::string>& inputs, const PatchTexts& pairs,
                          nlohmann::json& runs) {
  nlohmann::json table = read_csv_table(dir + "/summary.csv", {});
  std::vector<fs::path> points;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_directory(ec) && fs::exists(entry.path() / "config.ini", ec)) points.push_back(entry.path());
  std::sort(points.begin(), points.end());
  for (const fs::path& p : points) {
    try {
      runs.push_back(report_run_data(p.string(), inputs, pairs));
    } catch (const std::exception& e) {
      std::cerr << "note: sweep point " << p.string() << " left out: " << e.what() << "\n";
    }
  }
  return {{"path", dir}, {"table", table}};
}

// The page: report.html with the style, the script and the data put in.
std::string render_page(const nlohmann::json& data) {
  std::string json = data.dump();
  // '<' occurs only inside JSON strings, where \u003c means the same: no
  // "</script>" in the data can end the script element early.
  std::string safe;
  safe.reserve(json.size());
  for (char c : json) c == '<' ? safe += "\\u003c" : safe += c;
  std::string page = report_assets::kHTML;
  const auto put = [&page](const std::string& slot, const std::string& text) {
    const size_t at = page.find(slot);
    if (at == std::string::npos) throw std::logic_error("report.html has no slot " + slot);
    page.replace(at, slot.size(), text);
  };
  put("/*ATTNLAB_STYLE*/", report_assets::kCSS);
  put("/*ATTNLAB_SCRIPT*/", report_assets::kJS);
  put("\"ATTNLAB_DATA\"", safe);
  return page;
}

const char* const kReportUsage =
    "usage: attnlab report RUN [RUN ...] [--input \"INPUT\"]... [--out FILE]\n"
    "                      [--clean \"INPUT\" --corrupt \"INPUT\"]... [--eager]\n\n"
    "Writes one HTML page that opens offline in any browser (data, script and\n"
    "style inline; no network request): the run at a glance, its curves over\n"
    "steps (several runs overlaid), gradient flow from the probes (train\n"
    "--probe-every N), every layer x head's attention for the first held-out\n"
    "examples and for each --input, held-out answers, right and wrong, and\n"
    "activation patching maps for each --clean and --corrupt pair (the n-th\n"
    "--clean goes with the n-th --corrupt; see attnlab patch).\n"
    "A sweep directory (scripts/tools/sweep.py --out DIR) gets a table of its points.\n\n"
    "The page is FILE (default: the first RUN's report.html), written whole or\n"
    "not at all. An existing FILE is replaced only if attnlab wrote it, or with\n"
    "--overwrite. A missing or malformed run file is an error (exit 2).\n"
    "Parts of a long page (attention maps) draw when scrolled to; --eager draws\n"
    "them all as the page opens, for a screenshot or a saved copy.\n\n";

}  // namespace

int run_report(const Args& args) {
  std::vector<std::string> runs, inputs, clean, corrupt;
  std::string out;
  bool overwrite = false, eager = false;
  po::options_description opts = options_with_help("Options");
  opts.add_options()("run", po::value(&runs)->multitoken(), "run or sweep directories (also positional)")(
      "input", po::value(&inputs), "an input whose attention to show (repeatable)")(
      "clean", po::value(&clean), "a clean input to patch from (repeatable, one per --corrupt)")(
      "corrupt", po::value(&corrupt), "its corrupted input, of the same length")(
      "out", po::value(&out), "the HTML file (default: RUN/report.html)")(
      "overwrite", po::bool_switch(&overwrite), "replace FILE even if attnlab did not write it")(
      "eager", po::bool_switch(&eager), "draw every part as the page opens");
  po::positional_options_description positional;
  positional.add("run", -1);
  po::variables_map vm;
  if (!parse_command_line(args, opts, vm, kReportUsage,
                          "\nexample:\n  attnlab report runs/rev --input \"3 1 4 1 5\"\n", &positional))
    return kExitOk;
  if (runs.empty()) throw ValueError("no run directory given (see attnlab report --help)");
  if (vm.count("out") && out.empty()) throw ValueError("--out needs a path, got an empty one");  // "" is the default's
  if (clean.size() != corrupt.size())
    throw ValueError("--clean and --corrupt come in pairs; got " + std::to_string(clean.size()) + " --clean and " +
                     std::to_string(corrupt.size()) + " --corrupt");
  PatchTexts pairs;
  for (size_t i = 0; i < clean.size(); ++i) pairs.emplace_back(clean[i], corrupt[i]);
  std::cout << write_report(runs, inputs, out, overwrite, eager, pairs) << "\n";
  return kExitOk;
}

std::string write_report(const std::vector<std::string>& runs, const std::vector<std::string>& inputs, std::string out,
                         bool overwrite, bool eager, const PatchTexts& patch_pairs) {
  if (out.empty()) out = runs.front() + "/report.html";
  check_out_file(out, overwrite);
  nlohmann::json data = {{"runs", nlohmann::json::array()}, {"sweep", nullptr}, {"eager", eager}};
  for (const std::string& run : runs) {
    if (is_sweep(run)) data["sweep"] = sweep_data(run, inputs, patch_pairs, data["runs"]);
    else data["runs"].push_back(report_run_data(run, inputs, patch_pairs));
  }
  if (data["runs"].empty()) throw IoError("no readable run in '" + runs.front() + "'");
  write_file_atomic(out, render_page(data));
  return out;
}

}  // namespace attnlab::cli
