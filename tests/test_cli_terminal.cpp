// The CLI where it meets the terminal and the system, through real processes:
// decoding that reaches the end of the positional table, the progress bar
// under a pseudo-terminal, SIGHUP and Ctrl-C during a held-out evaluation,
// and attention's output when the disk takes no more.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "framework/io/checkpoint.h"
#include "models/config.h"
#include "models/sequence_model.h"
#include "tests/child_process.h"
#include "tests/cli_harness.h"

extern char** environ;

namespace fs = std::filesystem;
using attnlab::testing::run_attnlab;
using attnlab::testing::slurp;
using attnlab::testing::wait_exit;
using attnlab::testing::wait_until;
using attnlab::testing::words;
using attnlab::testing::TempDir;
using Result = attnlab::testing::CliResult;
using namespace attnlab;
using Catch::Matchers::Contains;

namespace {

const std::string kSmall = " --vocab 6 --heads 2 --layers 1 --d-model 32 --d-ff 64 --batch-size 32 --threads 1 --quiet";

// argv and envp prepared before fork: the child only calls async-signal-safe functions.
struct Command {
  std::vector<std::string> argv_text, env_text;
  std::vector<char*> argv, envp;
  explicit Command(const std::string& args) {
    argv_text = words(args);
    argv_text.insert(argv_text.begin(), ATTNLAB_EXE);
    for (char** e = environ; *e; ++e)
      if (std::strncmp(*e, "COLUMNS=", 8) != 0) env_text.emplace_back(*e);  // the window size must decide
    for (std::string& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (std::string& e : env_text) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
};

// Everything readable from fd until end of file (a pipe) or EIO (a pseudo-terminal whose other side closed).
std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) out.append(buf, static_cast<size_t>(n));
    else if (n < 0 && errno == EINTR) continue;
    else break;
  }
  ::close(fd);
  return out;
}

// `attnlab ARGS` on a pseudo-terminal of `columns` columns; returns the exit
// code and everything it printed (stdout and stderr share the terminal).
Result run_on_terminal(const std::string& args, unsigned short columns) {
  Command cmd(args);
  struct winsize ws = {};
  ws.ws_row = 24;
  ws.ws_col = columns;
  int master = -1;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, &ws);
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::execve(cmd.argv[0], cmd.argv.data(), cmd.envp.data());
    ::_exit(127);
  }
  const std::string out = read_all(master);  // drained while it runs, or it would block on a full terminal
  return {wait_exit(pid), out};
}

// `attnlab ARGS` with stdout and stderr into a pipe and, when max_file_bytes
// > 0, RLIMIT_FSIZE set (a full disk, as far as the child can tell; the pipe is not limited).
Result run_with_file_limit(const std::string& args, rlim_t max_file_bytes) {
  Command cmd(args);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    rlimit limit{max_file_bytes, max_file_bytes};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    ::execve(cmd.argv[0], cmd.argv.data(), cmd.envp.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  const std::string out = read_all(fds[0]);
  return {wait_exit(pid), out};
}

// Starts `attnlab ARGS` in the background, stdout and stderr into `log`.
pid_t spawn(const std::string& args, const std::string& log) {
  Command cmd(args);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) ::_exit(126);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::execve(cmd.argv[0], cmd.argv.data(), cmd.envp.data());
    ::_exit(127);
  }
  return pid;
}

int64_t metric_rows(const std::string& run) {  // complete rows, header excluded
  const std::string text = slurp(run + "/metrics.csv");
  const int64_t lines = std::count(text.begin(), text.end(), '\n');
  return lines > 0 ? lines - 1 : 0;
}

std::string checkpoint(const std::string& run, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "/checkpoints/step-%08lld.safetensors", static_cast<long long>(step));
  return run + name;
}

int64_t step_after(const std::string& text, const std::string& marker) {
  const size_t at = text.find(marker);
  REQUIRE(at != std::string::npos);
  return std::stoll(text.substr(at + marker.size()));
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Trains RUN for a few steps, then makes its head's <eos> logit -1e4 in the
// latest checkpoint, so that greedy decoding can only stop at the end of the
// positional table: an answer that cannot end in time, on every CPU.
void train_without_eos(const std::string& run, const std::string& flags) {
  Result r = run_attnlab("train" + flags + kSmall + " --heldout 20 --steps 5 --eval-every 5 --target 0 --run " + run);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const std::string stem = run + "/checkpoints/step-00000005";
  const Metadata meta = read_checkpoint_metadata(stem);
  auto model = make_model(TransformerConfig::from_json(nlohmann::json::parse(meta.at("model_config"))), 0);
  load_checkpoint(stem, *model, nullptr);
  bool found = false;
  for (auto& [name, v] : model->named_parameters())
    if (name == "head.bias") {
      v.value()[SpecialTokens::eos] = -1e4f;
      found = true;
    }
  REQUIRE(found);
  save_checkpoint(stem, *model, nullptr, meta);
}

// Lines of `text` but the notes ("note: ..."), which are not about a failure.
size_t error_lines(const std::string& text) { return count_of("\n" + text, "\n") - 1 - count_of("\n" + text, "\nnote: "); }

// Lines of `text` that start with "  position ".
size_t position_lines(const std::string& text) { return count_of("\n" + text, "\n  position "); }

// attention.json of an output directory.
nlohmann::json attention_meta(const std::string& out) {
  std::ifstream in(out + "/attention.json");
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

// Every file under `dir`, path -> content.
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    out[entry.path().string()] = entry.is_regular_file() ? slurp(entry.path().string()) : "(directory)";
  return out;
}

}  // namespace

// ---- decoding to the end of the positional table ----------------------------

TEST_CASE("seq2seq: predict, predict --logits and attention stop at the end of the positional table with a note",
          "[cli][terminal][decoding]") {
  TempDir dir("term-seq2seq-table");
  const std::string run = dir / "run";
  // Inputs of 4, a table of 5 positions: the answer, with no <eos> possible, fills all 5 (as many as
  // its budget, the expected answer's 4 tokens and one more).
  train_without_eos(run, " --task reverse --model seq2seq --min-len 4 --max-len 4 --positions 5");
  const std::string note = "reached the end of the model's positional table (5 positions";

  Result plain = run_attnlab("predict --run " + run + " \"1 2 3 4\"");
  INFO(plain.out);
  CHECK(plain.code == 0);
  CHECK_THAT(plain.out, Contains(note));

  Result logits = run_attnlab("predict --run " + run + " --logits \"1 2 3 4\"");
  INFO(logits.out);
  CHECK(logits.code == 0);
  CHECK_THAT(logits.out, Contains(note));
  CHECK(position_lines(logits.out) == 5);  // every decoded token's distribution

  const std::string out = dir / "maps";
  Result maps = run_attnlab("attention --run " + run + " --out " + out + " \"1 2 3 4\"");
  INFO(maps.out);
  REQUIRE(maps.code == 0);
  CHECK_THAT(maps.out, Contains(note));
  const nlohmann::json meta = attention_meta(out);
  REQUIRE(meta["layers"].size() == 3);  // encoder self, decoder self and cross
  int decoder_layers = 0;
  for (const auto& layer : meta["layers"])
    if (layer["name"].get<std::string>().find("decoder.") == 0) {
      CHECK(layer["queries"].size() == 5);  // [bos] and 4 of the 5 tokens: the last was never read
      ++decoder_layers;
    }
  CHECK(decoder_layers == 2);
}

TEST_CASE("decoder: predict, predict --logits and attention stop at the end of the positional table with a note",
          "[cli][terminal][decoding]") {
  TempDir dir("term-decoder-table");
  const std::string run = dir / "run";
  // [bos] 3 [sep] 3 = 8 positions: an input of 3 leaves room for 4 answer tokens, the last from position 8.
  train_without_eos(run, " --task reverse --model decoder --min-len 3 --max-len 3 --positions 8");
  const std::string note = "reached the end of the model's positional table (8 positions";

  Result plain = run_attnlab("predict --run " + run + " \"1 2 3\"");
  INFO(plain.out);
  CHECK(plain.code == 0);
  CHECK_THAT(plain.out, Contains(note));

  Result logits = run_attnlab("predict --run " + run + " --logits \"1 2 3\"");
  INFO(logits.out);
  CHECK(logits.code == 0);
  CHECK_THAT(logits.out, Contains(note));
  CHECK(position_lines(logits.out) == 4);

  const std::string out = dir / "maps";
  Result maps = run_attnlab("attention --run " + run + " --out " + out + " \"1 2 3\"");
  INFO(maps.out);
  REQUIRE(maps.code == 0);
  CHECK_THAT(maps.out, Contains(note));
  const nlohmann::json meta = attention_meta(out);
  REQUIRE(meta["layers"].size() == 1);
  for (const auto& layer : meta["layers"]) CHECK(layer["queries"].size() == 8);
}

TEST_CASE("predict, predict --logits and attention stop one token past the expected answer, as eval does, with a "
          "note", "[cli][terminal][decoding][random-positions]") {
  TempDir dir("term-budget");
  for (const std::string model : {"decoder", "seq2seq"}) {
    INFO(model);
    const std::string run = dir / model;
    // A table of 64 positions: the answer, with no <eos> possible, stops at its budget, the expected 4 tokens and one more.
    train_without_eos(run, " --task reverse --model " + model + " --min-len 4 --max-len 4 --positions 64");
    const std::string note = "note: no <eos> after 4 answer tokens";
    Result plain = run_attnlab("predict --run " + run + " \"1 2 3 4\"");
    INFO(plain.out);
    CHECK(plain.code == 0);
    CHECK_THAT(plain.out, Contains(note));
    CHECK_THAT(plain.out, !Contains("positional table"));
    std::istringstream lines(plain.out);
    std::string answer;
    while (std::getline(lines, answer) && answer.rfind("note: ", 0) == 0) {
    }
    CHECK(count_of(answer, " ") == 4);  // 5 tokens
    Result logits = run_attnlab("predict --run " + run + " --logits \"1 2 3 4\"");
    INFO(logits.out);
    CHECK(position_lines(logits.out) == 5);
    const std::string out = dir / (model + "-maps");
    Result maps = run_attnlab("attention --run " + run + " --out " + out + " \"1 2 3 4\"");
    INFO(maps.out);
    REQUIRE(maps.code == 0);
    CHECK_THAT(maps.out, Contains(note));
    const nlohmann::json meta = attention_meta(out);  // held: a range-for over a temporary's member would dangle
    for (const auto& layer : meta["layers"])
      if (layer["name"].get<std::string>().find("encoder.") != 0)  // [bos] 4 [sep] 4 | [bos] 4: the fifth never read
        CHECK(layer["queries"].size() == (model == "decoder" ? 10u : 5u));
  }
}

TEST_CASE("attention on a text language model maps the input text, the latest characters of its context when "
          "longer, with a note", "[cli][terminal][decoding]") {
  TempDir dir("term-text-attention");
  const std::string file = dir / "text.txt";
  {
    std::ofstream f(file);
    for (int i = 0; i < 40; ++i) f << "the quick brown fox jumps over the lazy dog\n";
  }
  const std::string run = dir / "run";
  Result r = run_attnlab("train --task text --file " + file +
                         " --model decoder --seq-len 24 --heads 2 --layers 1 --d-model 32 --d-ff 64 --batch-size 8"
                         " --threads 1 --quiet --steps 5 --eval-every 5 --run " + run);
  INFO(r.out);
  REQUIRE(r.code == 0);

  const std::string short_out = dir / "short";
  Result short_maps = run_attnlab("attention --run " + run + " --out " + short_out + " \"the quick\"");
  INFO(short_maps.out);
  REQUIRE(short_maps.code == 0);
  const nlohmann::json short_meta = attention_meta(short_out);
  REQUIRE(short_meta["layers"].size() == 1);
  for (const auto& layer : short_meta["layers"]) {
    CHECK(layer["queries"].size() == 9);  // the 9 characters, no [bos] or [sep]
    CHECK(layer["causal"] == true);
  }

  const std::string long_out = dir / "long";
  Result long_maps = run_attnlab("attention --run " + run + " --out " + long_out +
                                 " \"the quick brown fox jumps over the lazy dog\"");
  INFO(long_maps.out);
  REQUIRE(long_maps.code == 0);
  CHECK_THAT(long_maps.out, Contains("the input has 43 characters; this model reads at most 24"));
  const nlohmann::json meta = attention_meta(long_out);
  REQUIRE(meta["layers"].size() == 1);
  CHECK(meta["input"] == " jumps over the lazy dog");  // its last 24 characters
  for (const auto& layer : meta["layers"]) CHECK(layer["queries"].size() == 24);
}

// ---- the progress bar on a terminal -----------------------------------------

namespace {

// The redrawn bars in a terminal's output: each piece between \r or \n that
// shows "step N/M"; `in_place` is false when one was not drawn after "\r\033[K".
struct Bars {
  std::vector<std::string> lines;
  bool in_place = true;
};

Bars bars_in(const std::string& out) {
  Bars bars;
  const std::regex step(R"(step \d+/\d+)");
  size_t begin = 0;
  char before = '\n';
  while (begin <= out.size()) {
    const size_t end = out.find_first_of("\r\n", begin);
    std::string piece = out.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    const bool cleared = before == '\r' && piece.rfind("\033[K", 0) == 0;
    if (cleared) piece.erase(0, 3);
    if (std::regex_search(piece, step)) {
      bars.lines.push_back(piece);
      if (!cleared) bars.in_place = false;
    }
    if (end == std::string::npos) break;
    before = out[end];
    begin = end + 1;
  }
  return bars;
}

const std::string kBarRun = " --task reverse --min-len 5 --max-len 5" + kSmall.substr(0, kSmall.find(" --quiet")) +
                            " --heldout 100 --steps 400 --eval-every 100 --log-every 50 --target 0 --run ";

// Every bar drawn on a terminal of `columns` columns fits in columns - 1, is
// drawn in place, and shows at least `fields`; returns the bars.
std::vector<std::string> check_bars(const std::string& run, unsigned short columns,
                                    const std::vector<std::string>& fields) {
  Result r = run_on_terminal("train" + kBarRun + run, columns);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const Bars bars = bars_in(r.out);
  REQUIRE(bars.lines.size() >= 2);  // the first step's and the last step's at least
  CHECK(bars.in_place);
  for (const std::string& bar : bars.lines) {
    INFO(bar);
    CHECK(bar.size() <= static_cast<size_t>(columns - 1));
    for (const std::string& field : fields) CHECK_THAT(bar, Contains(field));
  }
  return bars.lines;
}

}  // namespace

TEST_CASE("the progress bar fits 80- and 200-column terminals, redraws in place and shows ETA and tokens/s, piped "
          "output stays plain lines", "[cli][terminal][progress]") {
  TempDir dir("term-bar");
  SECTION("80 columns: the least important fields go, ETA and tokens/s stay") {
    check_bars(dir / "narrow", 80, {"step ", "loss ", "tok/s", "ETA "});
  }
  SECTION("200 columns: every field and the bar graphic") {
    auto bars = check_bars(dir / "wide", 200, {"] ", "step ", "loss ", "tok ", "seq ", "tok/s", "ETA "});
    CHECK_THAT(bars.back(), Contains("step 400/400") && Contains("held-out "));
  }
  SECTION("16 columns: whole fields only, down to the step count alone, never a field cut short") {
    for (const std::string& bar : check_bars(dir / "tiny", 16, {"step "}))
      CHECK(std::regex_match(bar, std::regex(R"(step \d+/400(  ETA \d+:\d\d)?)")));
  }
  SECTION("piped: plain lines with every field, nothing redrawn") {
    Result piped = run_attnlab("train" + kBarRun + (dir / "piped"));
    INFO(piped.out);
    REQUIRE(piped.code == 0);
    CHECK(piped.out.find('\r') == std::string::npos);
    CHECK(std::regex_search(piped.out, std::regex(R"(\nstep 400/400  loss \d+\.\d{4}  tok +\d+\.\d%  seq +\d+\.\d%  )"
                                                  R"(held-out +\d+\.\d%  \d+\.\dk tok/s  ETA 0:00\n)")));
    // The figures are metrics.csv's last row (loss, train_token_acc, train_exact, heldout_exact), as printed.
    const std::string csv = slurp(dir / "piped/metrics.csv");
    std::vector<std::string> row;
    std::stringstream last(csv.substr(csv.rfind('\n', csv.size() - 2) + 1));
    for (std::string cell; std::getline(last, cell, ',');) row.push_back(cell);
    REQUIRE(row.size() >= 8);
    auto percent = [](const std::string& fraction) {
      char text[32];
      std::snprintf(text, sizeof text, "%5.1f%%", 100 * std::stod(fraction));
      return std::string(text);
    };
    char loss[32];
    std::snprintf(loss, sizeof loss, "loss %.4f", std::stod(row[1]));
    CHECK_THAT(piped.out, Contains(std::string("step 400/400  ") + loss + "  tok " + percent(row[4]) + "  seq " +
                                   percent(row[5]) + "  held-out " + percent(row[7]) + "  "));
  }
}

// ---- signals ------------------------------------------------------------------

TEST_CASE("SIGHUP (the terminal closed), even twice, checkpoints the finished step and exits 129, and the run resumes",
          "[cli][terminal][signals]") {
  TempDir dir("term-sighup");
  const std::string run = dir / "run";
  const pid_t pid = spawn("train --task reverse --min-len 5 --max-len 5" + kSmall +
                              " --heldout 100 --target 0 --eval-every 1000 --log-every 1 --steps 100000 --run " + run,
                          dir / "log");
  wait_until(pid, [&] { return metric_rows(run) >= 5; });
  // A closing terminal: the kernel hangs up the foreground job, then the shell its jobs.
  REQUIRE(::kill(pid, SIGHUP) == 0);
  REQUIRE(::kill(pid, SIGHUP) == 0);
  const int code = wait_exit(pid);
  const std::string log = slurp(dir / "log");
  INFO(log);
  REQUIRE(code == 129);
  const int64_t k = step_after(log, "interrupted by SIGHUP after step ");
  REQUIRE(fs::exists(checkpoint(run, k)));
  Result resumed = run_attnlab("train --resume " + run + " --steps " + std::to_string(k + 5) + " --quiet");
  INFO(resumed.out);
  CHECK(resumed.code == 0);
  CHECK(fs::exists(checkpoint(run, k + 5)));
}

TEST_CASE("SIGINT during a long held-out evaluation abandons it: exit 130 before its metrics row, the finished step "
          "checkpointed and loadable", "[cli][terminal][signals]") {
  TempDir dir("term-sigint-eval");
  const std::string run = dir / "run";
  // 40000 held-out answers decoded token by token: the evaluation at step 3 takes far longer than
  // the steps before it (about 30 s on a 2-core machine, 150 batches), so a run that waited for it
  // would write step 3's row.
  const pid_t pid = spawn("train --task reverse --model decoder --vocab 10 --min-len 12 --max-len 12 --heads 2"
                          " --layers 1 --d-model 64 --d-ff 128 --batch-size 32 --threads 1 --quiet --heldout 40000"
                          " --target 0 --eval-every 3 --log-every 1 --steps 100000 --run " + run,
                          dir / "log");
  wait_until(pid, [&] { return metric_rows(run) >= 2; });
  // Step 3 takes milliseconds; the signal then lands in its evaluation (or just before it starts).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  REQUIRE(::kill(pid, SIGINT) == 0);
  const int code = wait_exit(pid);
  const std::string log = slurp(dir / "log");
  INFO(log);
  REQUIRE(code == 130);
  CHECK(metric_rows(run) == 2);  // the evaluation of step 3 never finished
  const int64_t k = step_after(log, "interrupted by SIGINT after step ");
  CHECK(k == 3);
  REQUIRE(fs::exists(checkpoint(run, k)));
  Result e = run_attnlab("eval --run " + run + " --heldout 20");
  INFO(e.out);
  CHECK(e.code == 0);
  CHECK_THAT(e.out, Contains("(step " + std::to_string(k) + ")"));
}

// ---- attention on a full disk ------------------------------------------------------

TEST_CASE("attention on a full disk exits 1 with one line and leaves no partial output, new or replaced",
          "[cli][terminal][attention]") {
  TempDir dir("term-attention-disk");
  const std::string run = dir / "run";
  // A trained model: its answers end with <eos> (this test is not about the positional table).
  Result trained = run_attnlab("train --task reverse --model seq2seq --min-len 4 --max-len 4" + kSmall +
                               " --heldout 20 --steps 400 --eval-every 50 --run " + run);
  INFO(trained.out);
  REQUIRE(trained.code == 0);
  const std::string full = dir / "full";
  Result ok = run_attnlab("attention --run " + run + " --out " + full + " \"1 2 3 4\"");
  INFO(ok.out);
  REQUIRE(ok.code == 0);
  std::vector<uintmax_t> sizes;  // in the order they are written: the layers' maps, then attention.json
  const nlohmann::json meta = attention_meta(full);
  for (const auto& layer : meta["layers"])
    for (const auto& f : layer["files"]) sizes.push_back(fs::file_size(full + "/" + f.get<std::string>()));
  sizes.push_back(fs::file_size(full + "/attention.json"));
  // A limit that some file fits and a later one does not: the disk fills part-way through.
  rlim_t limit = 0;
  for (size_t i = 0; i < sizes.size() && limit == 0; ++i)
    for (size_t j = i + 1; j < sizes.size(); ++j)
      if (sizes[j] > sizes[i]) limit = sizes[i];
  REQUIRE(limit > 0);

  SECTION("a new output directory is not created") {
    const std::string out = dir / "new/maps";
    Result r = run_with_file_limit("attention --run " + run + " --out " + out + " \"1 2 3 4\"", limit);
    INFO(r.out);
    CHECK(r.code == 1);
    CHECK(error_lines(r.out) == 1);
    CHECK_THAT(r.out, Contains(std::strerror(EFBIG)));
    CHECK_FALSE(fs::exists(dir / "new"));
  }
  SECTION("an existing output directory keeps its previous maps, and no temporary remains") {
    const std::string out = dir / "previous";
    REQUIRE(run_attnlab("attention --run " + run + " --out " + out + " \"4 3 2 1\"").code == 0);
    const auto before = snapshot(out);
    Result r = run_with_file_limit("attention --run " + run + " --out " + out + " \"1 2 3 4\"", limit);
    INFO(r.out);
    CHECK(r.code == 1);
    CHECK(error_lines(r.out) == 1);
    CHECK(snapshot(out) == before);
  }
}
