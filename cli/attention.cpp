// attnlab attention: every layer's and head's attention weights for one input,
// as CSV matrices, for scripts/plot_attention.py.
#include <omp.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/command_line.h"
#include "cli/load_run.h"
#include "framework/io/atomic_file.h"
#include "framework/io/csv.h"
#include "framework/probe/attention_stats.h"
#include "models/batch.h"

namespace attnlab::cli {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> token_texts(const Task& task, const IntTensor& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids.data) out.push_back(task.token_text(id));
  return out;
}

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

}  // namespace

int run_attention(const Args& args) {
  RunInputArgs in;
  std::string out_dir;
  po::options_description opts = options_with_help("Options");
  po::positional_options_description positional;
  add_run_input_options(opts, positional, in);
  opts.add_options()("out", po::value(&out_dir),
                     "output directory (default: RUN/attention); replaced files are overwritten");
  po::variables_map vm;
  if (!parse_command_line(args, opts, vm,
                          "usage: attnlab attention --run DIR [--out DIR] \"INPUT\"\n\n"
                          "Runs the trained model on one input, teacher-forced on its own greedy answer (so decoders\n"
                          "attend over the sequence they generate), and writes each attention layer's weights, one\n"
                          "CSV matrix per head (rows: queries, columns: keys; each row sums to 1), named\n"
                          "<layer>.h<head>.csv, plus attention.json naming the layers, their files and tokens.\n"
                          "Plot them with scripts/plot_attention.py OUT_DIR.\n\n",
                          "\nexample:\n  attnlab attention --run runs/rev \"3 1 4 1 5 9 2 6\"\n", &positional))
    return kExitOk;
  check_run_input(vm, in, "attention");
  if (out_dir.empty()) out_dir = in.run_path + "/attention";
  omp_set_num_threads(1);

  LoadedRun loaded = load_run(RunDir(in.run_path), in.step);
  SequenceModel& model = *loaded.model;
  const Task& task = *loaded.task;
  const std::string& arch = model.config().arch;
  std::vector<int32_t> input = parse_input(loaded, in.input_text);
  std::vector<int32_t> output = model.greedy({input}, model.config().max_len)[0];
  std::vector<int32_t> target = output;
  if (arch == "encoder") target.resize(input.size(), input[0]);  // one output per input position
  FormattedBatch batch = format_batch(arch, {{input, target}});

  auto layers = find_attention_modules(model);
  {
    InferenceGuard guard(model);
    for (auto& [name, mha] : layers) mha->capture_weights(true);
    model.forward(batch.input);
    for (auto& [name, mha] : layers) mha->capture_weights(false);
  }

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw IoError("cannot create output directory '" + out_dir + "': " + ec.message());
  const auto src = token_texts(task, batch.input.src), tgt = token_texts(task, batch.input.tgt_in);
  nlohmann::json meta = {{"run", in.run_path}, {"step", loaded.step}, {"model", arch}, {"input", task.to_text(input)},
                         {"output", task.to_text(output)}, {"layers", nlohmann::json::array()}};
  int64_t files = 0;
  for (auto& [name, mha] : layers) {
    const Tensor& w = mha->last_weights();  // (1, h, T_q, T_k)
    const int64_t h = w.size(1), t_q = w.size(2), t_k = w.size(3);
    // Which sequences the layer's queries and keys run over.
    const bool cross = ends_with(name, "cross_attn");
    const bool over_src = arch == "encoder" || starts_with(name, "encoder.");
    const auto& queries = over_src ? src : tgt;
    const auto& keys = over_src || cross ? src : tgt;
    nlohmann::json layer = {{"name", name}, {"heads", h}, {"queries", queries}, {"keys", keys},
                            {"causal", arch != "encoder" && !over_src && !cross}, {"files", nlohmann::json::array()}};
    for (int64_t head = 0; head < h; ++head) {
      std::string text;
      for (int64_t i = 0; i < t_q; ++i) {
        for (int64_t j = 0; j < t_k; ++j)
          text += (j ? "," : "") + CsvWriter::format_number(w[((head * t_q) + i) * t_k + j]);
        text += "\n";
      }
      const std::string file = name + ".h" + std::to_string(head) + ".csv";
      write_file_atomic(out_dir + "/" + file, text);
      layer["files"].push_back(file);
      ++files;
    }
    meta["layers"].push_back(layer);
  }
  write_file_atomic(out_dir + "/attention.json", meta.dump(2) + "\n");
  std::cout << task.to_text(output) << "\n"
            << files << " attention maps (" << layers.size() << " layers) written to " << out_dir << "\n";
  return kExitOk;
}

}  // namespace attnlab::cli
