#include "cli/command_line.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <sstream>
#include <vector>

#include "datasets/task.h"
#include "datasets/utf8.h"
#include "framework/error.h"
#include "framework/io/atomic_file.h"

namespace attnlab::cli {

po::options_description options_with_help(const std::string& caption) {
  po::options_description out(caption);
  out.add_options()("help,h", "show this help");
  return out;
}

namespace {

std::string default_hint(const po::options_description& options, const std::string& word) {
  const auto tasks = all_task_names();
  if (options.find_nothrow("task", false) && std::find(tasks.begin(), tasks.end(), word) != tasks.end())
    return "--task " + word;
  return "";
}

// Boost names the words that are not options after `positional` only when it
// is given, and then refuses extra ones without naming them; without it, it
// drops them. Both are done here instead, so that a stray word is named.
void name_positionals(po::parsed_options& parsed, const po::options_description& options,
                      const po::positional_options_description* positional, const PositionalHint& hint) {
  unsigned position = 0;
  for (po::option& opt : parsed.options) {
    if (opt.position_key == -1 || !opt.string_key.empty()) continue;
    if (positional && position < positional->max_total_count()) {
      opt.string_key = positional->name_for_position(position++);
      continue;
    }
    const std::string word = opt.value.empty() ? std::string() : opt.value.front();
    const std::string meant = hint ? hint(word) : default_hint(options, word);
    const std::string takes = positional ? "at most " + std::to_string(positional->max_total_count()) : std::string("no");
    throw ValueError("unexpected argument '" + word + "' (this command takes " + takes + " positional argument" +
                     (meant.empty() ? ")" : "); did you mean " + meant + "?"));
  }
}

}  // namespace

bool parse_command_line(const Args& args, const po::options_description& options, po::variables_map& vm,
                        const std::string& usage, const std::string& footer,
                        const po::positional_options_description* positional, const PositionalHint& hint) {
  po::command_line_parser parser(args);
  parser.options(options);
  po::parsed_options parsed = parser.run();
  // --help wins over a stray word: whoever asks for help gets it.
  const bool help = std::any_of(parsed.options.begin(), parsed.options.end(),
                                [](const po::option& o) { return o.string_key == "help"; });
  if (!help) name_positionals(parsed, options, positional, hint);
  po::store(parsed, vm);
  if (vm.count("help")) {
    std::cout << fit_columns(usage) << options << fit_columns(footer);
    return false;
  }
  po::notify(vm);
  return true;
}

namespace {

// Greedy fill of `words` into lines of at most `width` columns.
void fill(const std::vector<std::string>& words, size_t width, std::string& out) {
  std::string line;
  for (const std::string& w : words) {
    if (!line.empty() && line.size() + 1 + w.size() > width) {
      out += line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + w;
  }
  if (!line.empty()) out += line + "\n";
}

// An indented line over `width` broken at spaces into shell continuation lines.
void break_indented(std::string line, size_t width, std::string& out) {
  const size_t indent = line.find_first_not_of(' ');
  while (line.size() > width) {
    const size_t cut = line.rfind(' ', width - 2);  // room for " \"
    if (cut == std::string::npos || cut <= indent) break;  // one long word: leave it
    out += line.substr(0, cut) + " \\\n";
    line = std::string(indent + 4, ' ') + line.substr(cut + 1);
  }
  out += line + "\n";
}

}  // namespace

std::string fit_columns(const std::string& text, size_t width) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string out;
  for (size_t i = 0; i < lines.size();) {
    const std::string& line = lines[i];
    if (line.empty() || line[0] == ' ') {
      if (line.size() > width) break_indented(line, width, out);
      else out += line + "\n";
      ++i;
      continue;
    }
    size_t end = i;  // the paragraph [i, end)
    bool long_line = false;
    while (end < lines.size() && !lines[end].empty() && lines[end][0] != ' ') long_line |= lines[end++].size() > width;
    if (!long_line) {
      for (; i < end; ++i) out += lines[i] + "\n";
      continue;
    }
    std::vector<std::string> words;
    for (; i < end; ++i) {
      std::istringstream w(lines[i]);
      for (std::string word; w >> word;) words.push_back(word);
    }
    fill(words, width, out);
  }
  if (!text.empty() && text.back() != '\n' && !out.empty()) out.pop_back();  // as the text ended
  return out;
}

std::set<std::string> given_options(const po::variables_map& vm) {
  std::set<std::string> names;
  for (const auto& [name, value] : vm)
    if (!value.defaulted()) names.insert(name);
  return names;
}

namespace {

constexpr uint64_t kMaxConfigBytes = 1 << 20;  // an INI of options is a few KiB; more is the wrong file

// The whole text of a config file; IoError for anything but a small regular text file.
std::string read_config_text(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  const std::string cannot = "cannot read config file '" + path + "'";
  if (!fs::exists(status)) throw IoError(cannot + ": no such file");
  if (fs::is_directory(status)) throw IoError(cannot + ": it is a directory, not an INI file");
  // InputFile refuses a device, pipe or socket, as every file attnlab reads.
  // A BOM (editors on some systems write one) would otherwise glue itself, unseen, to the first name.
  const std::string text = without_bom(read_file(path, kMaxConfigBytes, "config file"));
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
      throw IoError(cannot + ": not a text INI file (byte " + std::to_string(static_cast<int>(c)) + " at offset " +
                    std::to_string(i) + ")");
  }
  return text;
}

}  // namespace

void store_config_file(const std::string& path, const po::options_description& options, po::variables_map& vm) {
  std::istringstream in(read_config_text(path));
  try {
    po::store(po::parse_config_file(in, options, false), vm);  // values are validated by store
  } catch (const po::error& e) {
    throw ValueError(path + ": " + e.what());
  }
}

void check_run_and_step(const po::variables_map& vm, const std::string& run_path, int64_t step) {
  if (run_path.empty()) throw ValueError("--run DIR is required");
  if (vm.count("step") && step < 1) throw ValueError("--step must be >= 1, got " + std::to_string(step));
}

void add_run_input_options(po::options_description& opts, po::positional_options_description& positional,
                           RunInputArgs& args) {
  opts.add_options()
      ("run", po::value(&args.run_path), "the run directory (required)")
      ("input", po::value(&args.input_text), "the input sequence, as the task writes it (also the positional argument)")
      ("step", po::value(&args.step), "the checkpoint to use (default: the latest)");
  positional.add("input", 1);
}

void check_run_input(const po::variables_map& vm, const RunInputArgs& args, const std::string& command) {
  check_run_and_step(vm, args.run_path, args.step);
  if (!vm.count("input"))
    throw ValueError("no input sequence given (e.g. attnlab " + command + " --run DIR \"3 1 4\")");
}

}  // namespace attnlab::cli
