// attnlab attention: every layer's and head's attention weights for one input,
// as CSV matrices, for scripts/tools/plot_attention.py.
#include <omp.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <utility>

#include "cli/attention_reading.h"
#include "cli/command_line.h"
#include "cli/load_run.h"
#include "training/run_dir/claim.h"
#include "training/run_dir/layout.h"
#include "cli/signals.h"
#include "framework/io/atomic_file.h"
#include "framework/io/csv.h"
#include "framework/probe/attention_stats.h"
#include "models/batch.h"
#include "training/evaluate.h"

namespace attnlab::cli {

namespace fs = std::filesystem;

std::vector<std::string> token_texts(const Task& task, const IntTensor& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids.data) out.push_back(task.token_text(id));
  return out;
}

namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

}  // namespace

// Sequence tasks: teacher-forced on the greedy answer, so decoders attend
// over the sequence they generate; an answer that filled the positional table
// loses its last token, which was never read.
Reading read_sequence_task(const LoadedRun& loaded, const std::string& text) {
  SequenceModel& model = *loaded.model;
  Reading r;
  r.input = parse_input(loaded, text);
  const int64_t budget = decoding_budget(*loaded.task, r.input, model.config());  // as predict and eval decode it
  r.output = model.greedy({r.input}, budget)[0];
  if (answer_filled_table(model.config(), r.input, r.output)) note_answer_filled_table(model.config());
  else if (answer_spent_budget(model.config(), r.output, budget)) note_answer_spent_budget(budget);
  r.batch = teacher_forced_batch(model.config(), r.input, r.output, budget);
  return r;
}

// Language models (text) read plain text windows, without [bos] or [sep]:
// the maps are over the input as the model reads it, at most its training
// context (the latest characters), and the answer is the most likely next character.
Reading read_text(const LoadedRun& loaded, const std::string& text) {
  SequenceModel& model = *loaded.model;
  const Task& task = *loaded.task;
  Reading r;
  r.input = task.from_text(text);  // ValueError naming an unknown character
  if (r.input.empty()) throw ValueError("the input text is empty");
  const auto context = static_cast<size_t>(std::min<int64_t>(model.config().max_len, loaded.settings.task.seq_len));
  if (r.input.size() > context) {
    std::cerr << "note: the input has " << r.input.size() << " characters; this model reads at most " << context
              << " (its training context), so the maps cover the last " << context << "\n";
    r.input.erase(r.input.begin(), r.input.end() - static_cast<std::ptrdiff_t>(context));
  }
  r.batch = format_batch(BatchFormat::lm, {{r.input, r.input}});
  InferenceGuard guard(model);
  Var logits = model.forward(r.batch.input);  // (1, T, V)
  const int64_t V = logits.size(-1), T = logits.size(1);
  const Real* last = logits.value().data() + (T - 1) * V;
  r.output = {static_cast<int32_t>(std::max_element(last, last + V) - last)};
  return r;
}

namespace {

// The directories that fs::create_directories(dir) would create, deepest first.
std::vector<fs::path> missing_directories(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::path p = fs::absolute(dir, ec).lexically_normal(); !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    out.push_back(p);
    if (p == p.parent_path()) break;
  }
  return out;
}

// `path` without trailing slashes ("maps/" names the link maps, not its target).
fs::path without_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// Whether `name` is named as attnlab names a map (LAYER.hHEAD.csv).
bool is_map_name(const std::string& name) {
  static const std::regex pattern(R"([A-Za-z0-9_.]+\.h[0-9]+\.csv)");
  return std::regex_match(name, pattern);
}

// Whether attnlab may write `names` into out_dir, as run directories are
// claimed (training/run_dir/claim.h): a missing directory is created, an empty one
// taken, one carrying the attention marker has those files replaced. Anything
// else is refused (ValueError, exit 2) before a byte is written: a directory
// of the user's, a symlink as out_dir or as one of the names, the root, the
// working directory, $HOME or their parents. Returns whether out_dir is marked.
bool check_output_directory(const std::string& out_dir, const std::vector<std::string>& names) {
  const std::string refuses = "--out refuses to write into '" + out_dir + "': ";
  if (std::string why = protected_path_reason(out_dir); !why.empty()) throw ValueError(refuses + "it is " + why);
  std::error_code ec;
  const fs::file_status link = fs::symlink_status(without_trailing_slashes(out_dir), ec);
  if (fs::is_symlink(link))
    throw ValueError(refuses + "it is a symbolic link (attnlab does not write through one); name its target itself");
  if (!fs::exists(link)) return false;  // created, or the creation's own error
  if (!fs::is_directory(link)) throw ValueError(refuses + "it is not a directory");
  if (has_attention_marker(out_dir)) {
    // Whatever is named as attnlab names its outputs must be a plain file: a
    // symlink is refused, never followed nor replaced.
    const std::set<std::string> own(names.begin(), names.end());
    for (const auto& entry : fs::directory_iterator(out_dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (!own.count(name) && name != "attention.json" && !is_map_name(name)) continue;
      const fs::file_status file = entry.symlink_status(ec);
      if (!fs::is_regular_file(file))
        throw ValueError(refuses + "its " + name + " is " + (fs::is_symlink(file) ? "a symbolic link" : "not a regular file") +
                         " (attnlab replaces only files it wrote)");
    }
    return true;
  }
  if (fs::is_empty(out_dir, ec) && !ec) return false;
  throw ValueError(refuses + "it holds files and is not attnlab's attention output (no " + kAttentionMarker +
                   " marker); choose a new or empty directory");
}

// The CSV maps an earlier `attention` listed in out_dir/attention.json that
// `files` does not replace (a model with more layers or heads): stale once
// the new maps are in place. Only regular files named as attnlab names maps.
std::vector<fs::path> stale_maps(const std::string& out_dir, const OutputFiles& files) {
  std::vector<fs::path> stale;
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(read_file(out_dir + "/attention.json", 16 << 20));
    std::set<std::string> fresh;
    for (const auto& [name, content] : files) fresh.insert(name);
    for (const auto& layer : meta.at("layers"))
      for (const auto& file : layer.at("files")) {
        const std::string name = file.get<std::string>();
        std::error_code ec;
        if (!fresh.count(name) && is_map_name(name) &&
            fs::is_regular_file(fs::symlink_status(fs::path(out_dir) / name, ec)))
          stale.push_back(fs::path(out_dir) / name);
      }
  } catch (const std::exception&) {
    return {};  // no earlier attention.json, or not one attnlab wrote: nothing is removed
  }
  return stale;
}

// Writes every file into a fresh hidden directory inside out_dir first, then
// renames them into place: a full disk or a file-size limit fails before any
// file of out_dir is replaced, and what this call created (directories, the
// marker) is removed again.
void write_outputs(const std::string& out_dir, const OutputFiles& files) {
  std::vector<std::string> names;
  for (const auto& [name, content] : files) names.push_back(name);
  const bool marked = check_output_directory(out_dir, names);
  const std::vector<fs::path> created = missing_directories(out_dir);
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw IoError("cannot create output directory '" + out_dir + "': " + ec.message());
  // Undoes what this call did to out_dir before any map was in place.
  const auto undo = [&] {
    if (!marked) fs::remove(fs::path(out_dir) / kAttentionMarker, ec);
    for (const fs::path& p : created) fs::remove(p, ec);  // only if still empty: never what others wrote
  };
  if (!marked) {  // first, so that a stage left by a killed process lies in a marked directory
    try {
      write_attention_marker(out_dir);
    } catch (const IoError& e) {
      undo();
      throw RunFailure(std::string(e.what()) + "; no attention map was written to '" + out_dir + "'");
    }
  }
  std::string stage_name = out_dir + "/.attention.tmp.XXXXXX";
  if (!::mkdtemp(stage_name.data())) {
    const std::string why = std::error_code(errno, std::generic_category()).message();
    undo();
    throw RunFailure("cannot write to output directory '" + out_dir + "': " + why + "; nothing was written");
  }
  const fs::path stage = stage_name;
  try {
    for (const auto& [name, content] : files) write_file_atomic((stage / name).string(), content);
  } catch (const IoError& e) {
    fs::remove_all(stage, ec);
    undo();
    throw RunFailure(std::string(e.what()) + "; no attention map was written to '" + out_dir + "'");
  }
  const std::vector<fs::path> stale = marked ? stale_maps(out_dir, files) : std::vector<fs::path>();
  for (const auto& [name, content] : files) {
    fs::rename(stage / name, fs::path(out_dir) / name, ec);
    if (ec) {
      fs::remove_all(stage, ec);
      throw RunFailure("cannot move '" + name + "' into '" + out_dir + "': " + ec.message());
    }
  }
  fs::remove(stage, ec);
  for (const fs::path& file : stale) fs::remove(file, ec);
}

}  // namespace

std::vector<std::pair<std::string, Tensor>> capture_attention(SequenceModel& model, const FormattedBatch& batch) {
  std::vector<std::pair<std::string, Tensor>> layers;
  for (const auto& [name, mha] : find_attention_modules(model)) layers.emplace_back(name, Tensor());
  std::vector<int64_t> ids;
  for (size_t i = 0; i < layers.size(); ++i)
    ids.push_back(model.hooks().observe(layers[i].first + ".pattern", [&layers, i](const std::string&, const Var& w) {
      layers[i].second = w.value();
    }));
  InferenceGuard guard(model);
  model.forward(batch.input);
  for (int64_t id : ids) model.hooks().remove(id);
  return layers;
}

// One layer's maps: a CSV matrix per head into `files`, and its entry of attention.json.
nlohmann::json layer_maps(const std::string& name, const Tensor& w, BatchFormat format,
                          const std::vector<std::string>& src, const std::vector<std::string>& tgt, OutputFiles& files) {
  // w (1, h, T_q, T_k)
  const int64_t h = w.size(1), t_q = w.size(2), t_k = w.size(3);
  // Which sequences the layer's queries and keys run over.
  const bool cross = ends_with(name, "cross_attn");
  const bool over_src = format == BatchFormat::encoder || starts_with(name, "encoder.");
  const auto& queries = over_src ? src : tgt;
  const auto& keys = over_src || cross ? src : tgt;
  nlohmann::json layer = {{"name", name}, {"heads", h}, {"queries", queries}, {"keys", keys},
                          {"causal", format != BatchFormat::encoder && !over_src && !cross}, {"files", nlohmann::json::array()}};
  for (int64_t head = 0; head < h; ++head) {
    std::string text;
    for (int64_t i = 0; i < t_q; ++i) {
      for (int64_t j = 0; j < t_k; ++j)
        text += (j ? "," : "") + CsvWriter::format_number(w[((head * t_q) + i) * t_k + j]);
      text += "\n";
    }
    const std::string file = name + ".h" + std::to_string(head) + ".csv";
    files.emplace_back(file, std::move(text));
    layer["files"].push_back(file);
  }
  return layer;
}

namespace {

const char* const kAttentionUsage =
    "usage: attnlab attention --run DIR [--out DIR] \"INPUT\"\n\n"
    "Runs the trained model on one input, teacher-forced on its own greedy\n"
    "answer (so decoders attend over the sequence they generate), and writes\n"
    "each attention layer's weights, one CSV matrix per head (rows: queries,\n"
    "columns: keys; each row sums to 1), named <layer>.h<head>.csv, plus\n"
    "attention.json naming the layers, their files and tokens. The answer is\n"
    "decoded as predict and eval decode it: until <eos>, one token past the\n"
    "expected answer, or the end of the positional table (P = --positions at\n"
    "training): a decoder reads [bos] INPUT [sep] ANSWER, at most P positions;\n"
    "seq2seq decodes at most P tokens. An answer cut before <eos> gets a note\n"
    "on stderr, and its last token (never read by the model) has no row. A\n"
    "language model (--task text) reads the input text itself, at most its\n"
    "training context (the latest characters), and answers with its most\n"
    "likely next character. All files are written, or none (exit 1).\n"
    "Plot them with scripts/tools/plot_attention.py OUT_DIR.\n\n"
    "--out is created (or taken, if empty) and marked as attnlab's with a\n"
    ".attnlab-attention file; a later attention --out into a marked directory\n"
    "replaces only the files attnlab writes there. A directory without the\n"
    "marker that holds files, a symlink (as DIR, or as one of those files),\n"
    "the root, the working directory, $HOME and their parents are refused\n"
    "(exit 2) and left untouched.\n\n";

}  // namespace

int run_attention(const Args& args) {
  RunInputArgs in;
  std::string out_dir;
  po::options_description opts = options_with_help("Options");
  po::positional_options_description positional;
  add_run_input_options(opts, positional, in);
  opts.add_options()("out", po::value(&out_dir),
                     "output directory (default: RUN/attention): new, empty, or attnlab's "
                     "own (see above)");
  po::variables_map vm;
  if (!parse_command_line(args, opts, vm, kAttentionUsage,
                          "\nexample:\n  attnlab attention --run runs/rev \"3 1 4 1 5 9 2 6\"\n", &positional))
    return kExitOk;
  check_run_input(vm, in, "attention");
  if (out_dir.empty()) out_dir = in.run_path + "/attention";
  check_output_directory(out_dir, {});  // before the model is loaded; again, with the file names, before writing
  omp_set_num_threads(1);
  const FileSizeSignalGuard file_size_limit;  // a write past RLIMIT_FSIZE fails with a message

  LoadedRun loaded = load_run(RunDir(in.run_path), in.step);
  SequenceModel& model = *loaded.model;
  const Task& task = *loaded.task;
  const BatchFormat format = batch_format(model.config(), task.language_model());
  const Reading reading = task.language_model() ? read_text(loaded, in.input_text)
                                                : read_sequence_task(loaded, in.input_text);
  const FormattedBatch& batch = reading.batch;

  auto layers = capture_attention(model, batch);

  const auto src = token_texts(task, batch.input.src), tgt = token_texts(task, batch.input.tgt_in);
  nlohmann::json meta = {{"run", in.run_path}, {"step", loaded.step}, {"model", name_of(model.config().arch)},
                         {"input", task.to_text(reading.input)}, {"output", task.to_text(reading.output)},
                         {"layers", nlohmann::json::array()}};
  OutputFiles files;
  for (auto& [name, weights] : layers) meta["layers"].push_back(layer_maps(name, weights, format, src, tgt, files));
  files.emplace_back("attention.json", meta.dump(2) + "\n");
  write_outputs(out_dir, files);
  std::cout << task.to_text(reading.output) << "\n"
            << files.size() - 1 << " attention maps (" << layers.size() << " layers) written to " << out_dir << "\n";
  return kExitOk;
}

}  // namespace attnlab::cli
