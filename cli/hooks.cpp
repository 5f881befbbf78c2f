// attnlab hooks: every hook point of a run's model (docs/hooks.md), in forward
// order, with its shape for one short input.
#include <omp.h>

#include <algorithm>
#include <iostream>
#include <map>

#include "cli/command_line.h"
#include "cli/load_run.h"

namespace attnlab::cli {

namespace {

const char* const kHooksUsage =
    "usage: attnlab hooks --run DIR [--step N]\n\n"
    "Lists every hook point of the run's model in forward order: the name an\n"
    "instrument observes or replaces the activation by, its shape for one\n"
    "sequence of a few tokens (B = 1), and what the shape's dimensions are\n"
    "(docs/hooks.md says what each point is).\n\n";
const char* const kHooksExample = "\nexample:\n  attnlab hooks --run runs/reverse\n";

// One sequence of `length` tokens (bos: a valid id in every vocabulary).
IntTensor one_sequence(int64_t length) {
  IntTensor ids({1, length});
  std::fill(ids.data.begin(), ids.data.end(), SpecialTokens::bos);
  return ids;
}

}  // namespace

int run_hooks(const Args& args) {
  std::string run_path;
  int64_t step = 0;
  po::options_description opts = options_with_help("Options");
  opts.add_options()
      ("run", po::value(&run_path), "the run directory (required)")
      ("step", po::value(&step), "the checkpoint to use (default: the latest)");
  po::variables_map vm;
  if (!parse_command_line(args, opts, vm, kHooksUsage, kHooksExample)) return kExitOk;
  check_run_and_step(vm, run_path, step);
  omp_set_num_threads(1);

  LoadedRun loaded = load_run(RunDir(run_path), step);
  SequenceModel& model = *loaded.model;
  const TransformerConfig& c = model.config();
  // Source and target of different lengths, so that T_q and T_k show apart.
  const int64_t t_src = std::min<int64_t>(c.max_len, 6), t_tgt = std::min<int64_t>(c.max_len, 5);
  ModelInput in;
  if (c.arch != Arch::decoder) in.src = one_sequence(t_src);
  if (c.arch != Arch::encoder) in.tgt_in = one_sequence(c.arch == Arch::seq2seq ? t_tgt : t_src);
  std::map<std::string, std::string> shapes;
  for (const std::string& name : model.hooks().names())
    model.hooks().observe(name, [&shapes](const std::string& n, const Var& v) { shapes[n] = v.value().shape_str(); });
  InferenceGuard guard(model);
  model.forward(in);
  model.hooks().clear();

  std::cout << model.hooks().names().size() << " hook points of " << run_path << " (" << name_of(c.arch)
            << "),\nshapes for one sequence (B = 1) of "
            << (c.arch == Arch::seq2seq ? std::to_string(t_src) + " source and " + std::to_string(t_tgt) + " target"
                                        : std::to_string(t_src))
            << " tokens:\n";
  size_t width = 0, shape_width = 0;
  for (const std::string& name : model.hooks().names()) {
    width = std::max(width, name.size());
    shape_width = std::max(shape_width, shapes[name].size());
  }
  for (const std::string& name : model.hooks().names())
    std::cout << name << std::string(width + 2 - name.size(), ' ') << shapes[name]
              << std::string(shape_width + 2 - shapes[name].size(), ' ') << model.hooks().layout(name) << "\n";
  return kExitOk;
}

}  // namespace attnlab::cli
