// attnlab tasks: the task suite with an example of each.
#include <algorithm>
#include <iostream>

#include "cli/command_line.h"
#include "cli/option_set.h"
#include "datasets/task.h"
#include "framework/error.h"
#include "framework/random.h"
#include "training/settings.h"

namespace attnlab::cli {

namespace {

// recall needs two keys per pair (vocab >= 2 x max-len): where the lengths
// shown need more symbols than given, the line says which --vocab train needs.
std::string recall_needs(TaskConfig& shown) {
  if (shown.vocab >= 2 * shown.max_len) return "";
  const int64_t given = shown.vocab;
  shown.vocab = 2 * shown.max_len;
  return "    (shown with --vocab " + std::to_string(shown.vocab) + ": train refuses --vocab " + std::to_string(given) +
         " with --max-len " + std::to_string(shown.max_len) + ", as recall needs vocab >= 2 x max-len)\n";
}

}  // namespace

int run_tasks(const Args& args) {
  TaskConfig config = default_settings().task;  // train's defaults: what `attnlab train --task NAME` uses
  OptionSet opts("Options");
  opts.add("vocab", &config.vocab, "task symbols").add("min-len", &config.min_len, "shortest input")
      .add("max-len", &config.max_len, "longest input").add("digits", &config.digits, "add: digits per operand");
  po::options_description all = options_with_help();
  all.add(opts.description());
  po::variables_map vm;
  if (!parse_command_line(args, all, vm,
                          "usage: attnlab tasks [options]\n\nLists the tasks, each with two random examples, for the\n"
                          "lengths and symbols `attnlab train --task NAME` uses with the same options\n"
                          "(their defaults are train's).\n\n"))
    return kExitOk;
  std::cout << "tasks read from files: pairs (--file a TSV of input<TAB>output lines) and text\n"
               "(--file a text, character-level language model); see docs/data.md\n\n";
  std::cout << "special tokens: <pad> 0, <bos> 1, <eos> 2, <sep> 3; task symbols start at id 4\n\n";
  for (const std::string& name : all_task_names()) {
    if (name == "pairs" || name == "text") continue;  // they read a file: see --help of train
    TaskConfig shown = config;
    shown.name = name;
    const std::string note = name == "recall" ? recall_needs(shown) : "";  // the lengths train uses, never others
    std::unique_ptr<Task> task;
    try {
      task = make_task(shown);
    } catch (const ValueError& e) {  // what train says to the same options
      std::cout << name << ": attnlab train --task " << name << " refuses these options: " << e.what() << "\n";
      continue;
    }
    Rng rng(7);
    std::cout << task->describe() << "\n" << note;
    for (int i = 0; i < 2; ++i) std::cout << "    " << example_text(*task, task->sample(rng)) << "\n";
  }
  return kExitOk;
}

}  // namespace attnlab::cli
