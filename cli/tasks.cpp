// attnlab tasks: the task suite with an example of each.
#include <algorithm>
#include <iostream>

#include "cli/command_line.h"
#include "cli/option_set.h"
#include "datasets/task.h"
#include "framework/random.h"

namespace attnlab::cli {

int run_tasks(const Args& args) {
  TaskConfig config;
  config.vocab = 10;
  config.min_len = config.max_len = 8;
  OptionSet opts("Options");
  opts.add("vocab", &config.vocab, "task symbols").add("min-len", &config.min_len, "shortest input")
      .add("max-len", &config.max_len, "longest input").add("digits", &config.digits, "add: digits per operand");
  po::options_description all = options_with_help();
  all.add(opts.description());
  po::variables_map vm;
  if (!parse_command_line(args, all, vm, "usage: attnlab tasks [options]\n\nLists the tasks, each with two random examples.\n\n"))
    return kExitOk;
  std::cout << "tasks read from files: pairs (--file a TSV of input<TAB>output lines) and text\n"
               "(--file a text, character-level language model); see docs/data.md\n\n";
  std::cout << "special tokens: <pad> 0, <bos> 1, <eos> 2, <sep> 3; task symbols start at id 4\n\n";
  for (const std::string& name : all_task_names()) {
    if (name == "pairs" || name == "text") continue;  // they read a file: see --help of train
    TaskConfig shown = config;
    shown.name = name;
    if (name == "recall") {  // pairs of distinct keys: half the symbols are keys
      shown.vocab = std::max<int64_t>(config.vocab, 16);
      shown.min_len = std::min<int64_t>(config.min_len, 4);
      shown.max_len = std::min<int64_t>(config.max_len, 4);
    }
    auto task = make_task(shown);
    Rng rng(7);
    std::cout << task->describe() << "\n";
    for (int i = 0; i < 2; ++i) std::cout << "    " << example_text(*task, task->sample(rng)) << "\n";
  }
  return kExitOk;
}

}  // namespace attnlab::cli
