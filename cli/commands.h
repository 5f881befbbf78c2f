#pragma once
// The attnlab subcommands: one file each in cli/. Each takes the arguments
// after its name and returns the process exit code.
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

namespace attnlab::cli {

using Args = std::vector<std::string>;

// `attnlab ARGS...`: runs the subcommand argv[1] and returns the exit code
// (cli/dispatch.cpp; main() is cli/main.cpp).
int run_command_line(int argc, char** argv);

int run_train(const Args& args);
int run_eval(const Args& args);
int run_predict(const Args& args);
int run_tasks(const Args& args);
int run_bench(const Args& args);
int run_gradcheck(const Args& args);
int run_attention(const Args& args);
int run_sample(const Args& args);
int run_hooks(const Args& args);
int run_lens(const Args& args);
int run_patch(const Args& args);
int run_ablate(const Args& args);
int run_report(const Args& args);
int run_claim_dir(const Args& args);

// Exit codes: 0 success, 1 a failure during a run (e.g. NaN loss, a
// checkpoint the disk would not take), 2 bad input (flags, values, files),
// 130/143 interrupted by SIGINT/SIGTERM.
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// A run that started well and then failed for a reason outside its input,
// such as a full disk while checkpointing: one line, exit code 1 (an IoError
// would say 2, bad input).
struct RunFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What an error a command threw becomes: the one line printed on stderr
// ("attnlab COMMAND: ...") and the exit code. One table for every command.
struct Failure {
  int code;
  std::string line;
};
Failure describe_failure(const std::string& command, std::exception_ptr error);

// A failure whose line was printed already (under mpirun, by rank 0 before
// any process ended): the dispatcher only returns its exit code.
struct ReportedFailure {
  int code;
};

}  // namespace attnlab::cli
