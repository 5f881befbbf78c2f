// Files attnlab reads that it must refuse at once, with one line naming the
// file: devices and FIFOs where a file should be (a read that never ends), a
// safetensors header that claims more than its file holds (an allocation the
// file cannot back), a checkpoint renamed to another step, and data files
// that are not UTF-8 text (their tokens would reach the checkpoint's JSON
// metadata, which cannot hold them, only when the first checkpoint is
// written). And the echo of a user's value in a message is bounded.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "datasets/task.h"
#include "datasets/utf8.h"
#include "framework/error.h"
#include "framework/io/atomic_file.h"
#include "framework/io/safetensors.h"
#include "tests/cli_harness.h"
#include "training/checkpoints.h"
#include "training/settings.h"

using namespace attnlab;
using namespace attnlab::testing;
namespace fs = std::filesystem;

namespace {

const std::string kTiny = " --d-model 16 --heads 2 --layers 1 --d-ff 32 --threads 1 --quiet";
// A guard against a command that never ends, not a timing assertion.
const std::string kTimeout = "timeout 60";

std::string write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// Runs `body` in a forked child and returns its exit code; -1 when it did not
// end within `seconds` (it is then killed): a read that waits or grows for ever.
int in_child(const std::function<int()>& body, int seconds = 30) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 99;
    try {
      code = body();
    } catch (...) {
      code = 98;
    }
    ::_exit(code);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}

// Limits this (child) process's address space to what it uses now plus
// `extra` bytes, so that an allocation of the size of a file is refused.
void limit_address_space(uint64_t extra) {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0;
  statm >> pages;
  const auto limit = static_cast<rlim_t>(pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) + extra);
  rlimit r{limit, limit};
  ::setrlimit(RLIMIT_AS, &r);
}

// A sparse file of `size` bytes that starts with `head` (no disk space used for the rest).
void sparse_file(const std::string& path, const std::string& head, uint64_t size) {
  write(path, head);
  fs::resize_file(path, size);
}

std::string u64_le(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

int lines_of(const std::string& text) { return static_cast<int>(std::count(text.begin(), text.end(), '\n')); }

}  // namespace

TEST_CASE("read_file refuses a FIFO, a device and a directory at once, naming the path", "[io][files]") {
  TempDir dir("refuse-special");
  const std::string fifo = dir / "fifo", zero = dir / "zero";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  fs::create_symlink("/dev/zero", zero);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {fifo, "not a regular file"}, {zero, "not a regular file"}, {"/dev/null", "not a regular file"},
      {dir.path.string(), std::strerror(EISDIR)}};
  for (const auto& [path, reason] : cases) {
    INFO(path);
    // In a child: before, open() waited for a writer on the FIFO, and /dev/zero was read until memory ran out.
    const int code = in_child([&, path = path, reason = reason] {
      try {
        read_file(path);
      } catch (const IoError& e) {
        return std::string(e.what()).rfind("cannot read '" + path + "': " + reason, 0) == 0 ? 0 : 1;
      }
      return 2;
    });
    CHECK(code == 0);
  }
  CHECK_THROWS_WITH(read_file(zero, 100, "config file"), "cannot read config file '" + zero + "': not a regular file (a device, pipe or socket)");
  const std::string big = write(dir / "big", std::string(101, 'x'));
  CHECK_THROWS_WITH(read_file(big, 100), Catch::Contains("101 bytes, more than the 100"));
  CHECK(read_file(big, 101) == std::string(101, 'x'));
}

TEST_CASE("load_safetensors checks the header's sizes against the file's before reading its data", "[io][files]") {
  TempDir dir("refuse-sparse");
  const uint64_t size = uint64_t{8} << 30;  // 8 GiB, sparse
  SECTION("a header length past the end of the file") {
    const std::string path = dir / "long_header.safetensors";
    sparse_file(path, u64_le(uint64_t{1} << 40), size);
    // With at most 1 GiB more address space: reading the file whole (as before) cannot even start.
    const int code = in_child([&] {
      limit_address_space(uint64_t{1} << 30);
      try {
        load_safetensors(path);
      } catch (const IoError& e) {
        return std::string(e.what()).find("header length 1099511627776 goes beyond the end of the file (8589934592 bytes)") !=
                       std::string::npos
                   ? 0
                   : 1;
      }
      return 2;
    });
    CHECK(code == 0);
  }
  SECTION("a tensor whose data offsets lie past the end of the file") {
    const std::string path = dir / "big_tensor.safetensors";
    std::string header = R"({"w":{"dtype":"F32","shape":[274877906944],"data_offsets":[0,1099511627776]}})";
    header.append((8 - header.size() % 8) % 8, ' ');
    sparse_file(path, u64_le(header.size()) + header, size);
    const int code = in_child([&] {
      limit_address_space(uint64_t{1} << 30);
      try {
        load_safetensors(path);
      } catch (const IoError& e) {
        return std::string(e.what()).find("data_offsets [0, 1099511627776] lie outside the data") != std::string::npos ? 0 : 1;
      }
      return 2;
    });
    CHECK(code == 0);
  }
}

TEST_CASE("a config.ini, checkpoint, vocab.txt or data file that is a FIFO or a device is refused at once, exit 2, naming it",
          "[cli][files]") {
  TempDir dir("refuse-special-cli");
  const std::string run = dir / "run";
  write(dir / "p.tsv", "a b\tb a\nb c\tc b\nc a\ta c\na a\ta a\nb b\tb b\nc c\tc c\nb a\ta b\n");
  REQUIRE(run_attnlab("train --task pairs --file " + dir / "p.tsv" + " --model decoder --steps 4 --eval-every 2 --run " + run + kTiny).code == 0);
  const std::string ckpt = "checkpoints/step-00000004.safetensors";
  const std::vector<std::string> commands = {"eval --run R", "predict --run R \"a b\"", "sample --run R",
                                             "attention --run R --out " + dir / "maps" + " \"a b\"",
                                             "train --resume R --steps 6 --quiet"};
  for (const std::string& file : {std::string("config.ini"), ckpt, std::string("vocab.txt")}) {
    for (const std::string kind : {"fifo", "/dev/zero"}) {
      const std::string copy = dir / "copy";
      fs::remove_all(copy);
      fs::copy(run, copy, fs::copy_options::recursive);
      fs::remove(copy + "/" + file);
      if (kind == "fifo") REQUIRE(::mkfifo((copy + "/" + file).c_str(), 0644) == 0);
      else fs::create_symlink(kind, copy + "/" + file);
      for (std::string command : commands) {
        if (file == "vocab.txt" && command.rfind("train", 0) == 0) continue;  // resume compares vocab.txt (cli/train_job.cpp)
        command.replace(command.find(" R"), 2, " " + copy);
        const CliResult r = run_attnlab(command, kTimeout);
        INFO(file << " as " << kind << ": " << command << " -> " << r.code << " " << r.out);
        CHECK(r.code == 2);
        CHECK(r.out.find("'" + copy + "/" + file + "': not a regular file (a device, pipe or socket)") != std::string::npos);
        CHECK(lines_of(r.out) == 1);
      }
    }
  }
  const std::string fifo = dir / "data.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  for (const std::string task : {"pairs", "text"}) {
    const CliResult r = run_attnlab("train --task " + task + " --file " + fifo + " --run " + dir / "never" + kTiny, kTimeout);
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK(r.out.find("cannot read '" + fifo + "': not a regular file") != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "never"));
  }
}

TEST_CASE("eval refuses a checkpoint whose header claims more than its file holds without reading the file whole", "[cli][files]") {
  TempDir dir("refuse-sparse-cli");
  const std::string run = dir / "run";
  REQUIRE(run_attnlab("train --task reverse --vocab 6 --min-len 4 --max-len 4 --steps 2 --eval-every 2 --run " + run + kTiny).code == 0);
  const std::string ckpt = run + "/checkpoints/step-00000002.safetensors";
  fs::remove(ckpt);
  sparse_file(ckpt, u64_le(uint64_t{1} << 40), uint64_t{16} << 30);  // 16 GiB, sparse
  // 4 GB of address space: enough for eval, not for the file. AddressSanitizer reserves terabytes of
  // shadow address space at start, so there the limit is left off (the Release suite holds it) and the
  // refusal itself is still checked.
#if defined(__SANITIZE_ADDRESS__)
  const std::string address_limit;
#else
  const std::string address_limit = "ulimit -v 4000000; ";
#endif
  const CliResult r = run_attnlab("eval --run " + run + " --threads 1", address_limit + kTimeout);
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK(r.out.find("safetensors file '" + ckpt + "': header length 1099511627776 goes beyond the end of the file") != std::string::npos);
  CHECK(lines_of(r.out) == 1);
}

TEST_CASE("a checkpoint renamed to another step is refused by eval, predict and train --resume, naming both steps",
          "[cli][files]") {
  TempDir dir("renamed-checkpoint");
  const std::string run = dir / "run";
  REQUIRE(run_attnlab("train --task reverse --vocab 6 --min-len 4 --max-len 4 --steps 4 --eval-every 2 --run " + run + kTiny).code == 0);
  const std::string from = run + "/checkpoints/step-00000002", to = run + "/checkpoints/step-00000009";
  fs::rename(from + ".safetensors", to + ".safetensors");
  fs::rename(from + ".optim.safetensors", to + ".optim.safetensors");
  const std::string expected =
      to + ".safetensors: its file name gives step 9, but its metadata says it is the checkpoint of step 2";
  for (const std::string& command : {"eval --run " + run, "predict --run " + run + " \"1 2 3 4\"",
                                    "train --resume " + run + " --steps 12 --quiet"}) {
    const CliResult r = run_attnlab(command);
    INFO(command << " -> " << r.out);
    CHECK(r.code == 2);
    CHECK(r.out.find(expected) != std::string::npos);
    CHECK(lines_of(r.out) == 1);
  }
  // The checkpoint that kept its name is still used.
  CHECK(run_attnlab("eval --run " + run + " --step 4").code == 0);
}

TEST_CASE("shortened keeps a value whole up to 60 bytes, else its start at a character boundary and its size", "[io][errors]") {
  CHECK(shortened(std::string(60, 'x')) == std::string(60, 'x'));
  CHECK(shortened(std::string(61, 'x')) == std::string(60, 'x') + "... (61 bytes)");
  // "é" is 2 bytes: byte 60 would cut the 30th in two.
  std::string accents;
  for (int i = 0; i < 40; ++i) accents += "\xC3\xA9";
  CHECK(shortened(accents) == accents.substr(0, 60) + "... (80 bytes)");
  CHECK(shortened("a" + accents) == "a" + accents.substr(0, 58) + "... (81 bytes)");
  CHECK(is_utf8(shortened("a" + accents)));
}

TEST_CASE("a 100 KB token in predict's input or in a data file is echoed shortened, with its size", "[cli][files][errors]") {
  TempDir dir("long-token");
  const std::string run = dir / "run", pairs = dir / "pairs";
  REQUIRE(run_attnlab("train --task reverse --vocab 6 --min-len 4 --max-len 4 --steps 2 --eval-every 2 --run " + run + kTiny).code == 0);
  write(dir / "p.tsv", "a b\tb a\nb c\tc b\nc a\ta c\na a\ta a\nb b\tb b\n");
  REQUIRE(run_attnlab("train --task pairs --file " + dir / "p.tsv" + " --model decoder --steps 2 --eval-every 2 --run " + pairs + kTiny).code == 0);
  const std::string token(100000, 'x');
  write(dir / "held.tsv", "a " + token + "\tb\n");
  const std::vector<std::string> commands = {
      "predict --run " + run + " \"1 2 " + token + "\"", "predict --run " + pairs + " \"a " + token + "\"",
      "train --task pairs --file " + dir / "p.tsv" + " --heldout-file " + dir / "held.tsv" + " --run " + dir / "never" + kTiny};
  for (const std::string& command : commands) {
    const CliResult r = run_attnlab(command);
    INFO(command.substr(0, 80) << " -> " << r.out.substr(0, 300));
    CHECK(r.code == 2);
    CHECK(r.out.find(std::string(60, 'x') + "... (100000 bytes)") != std::string::npos);
    CHECK(r.out.size() < 500);
  }
}

TEST_CASE("data files that are not UTF-8 text are refused at load naming the file, line, byte offset and bytes",
          "[datasets][files][errors]") {
  TempDir dir("utf8-data");
  struct Case {
    std::string bytes, where;
  };
  // Well-formed around the fault, so that only the fault can be refused.
  const std::vector<Case> cases = {
      {"ab\tba\nThe log: all \xff well\tx\n", "line 2 (byte offset 19): not valid UTF-8 (byte 0xFF)"},
      {"ab\tba\nCaf\xc3(\tx\n", "line 2 (byte offset 9): not valid UTF-8 (bytes 0xC3 0x28)"},
      {"a\x80 b\tb\n", "line 1 (byte offset 1): not valid UTF-8 (byte 0x80)"},
      {"a\xc0\xaf\tb\n", "line 1 (byte offset 1): not valid UTF-8 (byte 0xC0)"},  // overlong '/'
      {"a\xed\xa0\x80\tb\n", "line 1 (byte offset 1): not valid UTF-8 (bytes 0xED 0xA0)"},  // a surrogate
      {"a\xf4\x90\x80\x80\tb\n", "line 1 (byte offset 1): not valid UTF-8 (bytes 0xF4 0x90)"},  // past U+10FFFF
      {"a\xf0\x8f\xbf\xbf\tb\n", "line 1 (byte offset 1): not valid UTF-8 (bytes 0xF0 0x8F)"},  // overlong U+FFFF
      {"ab\tb\xf0\x80\x80\xaf\n", "line 1 (byte offset 4): not valid UTF-8 (bytes 0xF0 0x80)"},  // overlong '/'
      {"a\xe0\x9f\xbf\tb\n", "line 1 (byte offset 1): not valid UTF-8 (bytes 0xE0 0x9F)"},  // overlong U+07FF
      {"a\xf5\x80\x80\x80\tb\n", "line 1 (byte offset 1): not valid UTF-8 (byte 0xF5)"},  // past U+10FFFF
      {"a\xc1\xbf\tb\n", "line 1 (byte offset 1): not valid UTF-8 (byte 0xC1)"},  // overlong U+007F
      {"a\xf1\x80\x28\x80\tb\n", "line 1 (byte offset 1): not valid UTF-8 (bytes 0xF1 0x80 0x28)"},
      {"a\xf3\x80\x80\xc0\tb\n", "line 1 (byte offset 1): not valid UTF-8 (bytes 0xF3 0x80 0x80 0xC0)"},
      {"ab\tba\nab\tb\xe2\x82", "line 2 (byte offset 10): not valid UTF-8 (bytes 0xE2 0x82)"},  // cut at the end
      {std::string("ab\tba\na\0b\tb\n", 12), "line 2 (byte offset 7): a NUL byte (0x00), so this is not a text file"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = write(dir / ("bad" + std::to_string(i) + ".tsv"), cases[i].bytes);
    for (const std::string task : {"pairs words", "pairs chars", "text"}) {
      TaskConfig c;
      c.name = task.substr(0, task.find(' '));
      if (c.name == "pairs") c.tokenize = parse_choice<Tokenize>("tokenize", task.substr(6));
      c.file = path;
      c.seq_len = 2;
      INFO(task << " " << i);
      CHECK_THROWS_WITH(make_task(c), Catch::StartsWith(path + " " + cases[i].where));
    }
  }
  // A held-out file and a run's vocab.txt are checked the same way.
  TaskConfig c;
  c.name = "pairs";
  c.file = write(dir / "good.tsv", "ab\tba\nbc\tcb\n");
  c.heldout_file = write(dir / "held.tsv", "ab\tba\n\xfe\tb\n");
  CHECK_THROWS_WITH(make_task(c), Catch::StartsWith(c.heldout_file + " line 2 (byte offset 6): not valid UTF-8 (byte 0xFE)"));
  c.heldout_file.clear();
  c.vocab_path = write(dir / "vocab.txt", "# attnlab vocabulary: words\n<pad>\n<bos>\n<eos>\n<sep>\nab\nb\xff\n");
  CHECK_THROWS_AS(make_task(c), IoError);
  CHECK_THROWS_WITH(make_task(c), Catch::StartsWith(c.vocab_path + " line 7 (byte offset 56): not valid UTF-8 (byte 0xFF)"));
  // The path is recorded in the checkpoints' JSON too.
  c.vocab_path.clear();
  c.file = write(dir / "caf\xe9.tsv", "ab\tba\nbc\tcb\n");
  CHECK_THROWS_WITH(make_task(c), Catch::Contains("is not valid UTF-8, which a run's checkpoints cannot record"));
}

TEST_CASE("a BOM at the start of a data file is not a character, and CR LF line ends are line ends for pairs", "[datasets][files]") {
  TempDir dir("bom-crlf");
  TaskConfig c;
  c.name = "pairs";
  c.heldout_fraction = 0;
  c.file = write(dir / "lf.tsv", "ab cd\tcd ab\nx\ty\n");
  const auto lf = make_task(c);
  for (const std::string tokenize : {"words", "chars"}) {
    c.tokenize = parse_choice<Tokenize>("tokenize", tokenize);
    c.file = write(dir / "lf.tsv", "ab cd\tcd ab\nx\ty\n");
    const auto plain = make_task(c);
    c.file = write(dir / "bom.tsv", "\xEF\xBB\xBF" "ab cd\tcd ab\r\nx\ty\r\n");
    const auto bom = make_task(c);
    INFO(tokenize);
    REQUIRE(bom->vocab_size() == plain->vocab_size());
    for (int32_t id = 0; id < plain->vocab_size(); ++id) CHECK(bom->token_text(id) == plain->token_text(id));
    CHECK(bom->token_text(kNumSpecial) == (tokenize == "words" ? "ab" : "a"));
  }
  // text keeps every character of the text, "\r" too, but not the BOM.
  c = TaskConfig();
  c.name = "text";
  c.seq_len = 4;
  c.file = write(dir / "t.txt", "\xEF\xBB\xBF" "hello\r\nworld\r\nagain\r\n");
  const auto text = make_task(c);
  CHECK(text->token_text(kNumSpecial) == "h");
  CHECK(text->to_text(text->from_text("lo\r\nw")) == "lo\r\nw");
}

TEST_CASE("UTF-8's boundary characters pass, one past each boundary does not: the shortest form only, no surrogates, "
          "nothing past U+10FFFF",
          "[datasets][files][errors]") {
  // U+0080, U+07FF, U+0800, U+D7FF, U+E000, U+FFFF, U+10000, U+3FFFF, U+40000, U+FFFFF, U+100000, U+10FFFF
  for (const std::string ok : {"\xc2\x80", "\xdf\xbf", "\xe0\xa0\x80", "\xed\x9f\xbf", "\xee\x80\x80",
                               "\xef\xbf\xbf", "\xf0\x90\x80\x80", "\xf0\xbf\xbf\xbf", "\xf1\x80\x80\x80",
                               "\xf3\xbf\xbf\xbf", "\xf4\x80\x80\x80", "\xf4\x8f\xbf\xbf"}) {
    INFO(ok.size() << " bytes from 0x" << std::hex << int(static_cast<unsigned char>(ok[0])));
    CHECK(is_utf8("x" + ok + "y"));
    CHECK(utf8_text_problem("x" + ok + "y") == "");
  }
  // Overlong (C0, C1, E0 80-9F, F0 80-8F), a surrogate (ED A0-BF), past U+10FFFF (F4 90-BF, F5-FF), a lone continuation.
  for (const std::string bad : {"\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xe0\x9f\xbf", "\xf0\x80\x80\x80",
                                "\xf0\x8f\xbf\xbf", "\xed\xa0\x80", "\xed\xbf\xbf", "\xf4\x90\x80\x80",
                                "\xf4\xbf\xbf\xbf", "\xf5\x80\x80\x80", "\xf7\xbf\xbf\xbf", "\xf8\x88\x80\x80\x80",
                                "\xff", "\xbf"}) {
    INFO(bad.size() << " bytes from 0x" << std::hex << int(static_cast<unsigned char>(bad[0])));
    CHECK_FALSE(is_utf8("x" + bad + "y"));
    CHECK_THAT(utf8_text_problem("x" + bad + "y"), Catch::StartsWith("line 1 (byte offset 1): not valid UTF-8"));
  }
}

TEST_CASE("the issue's file with one 0xFF byte is refused before step 1: exit 2, one line, no run", "[cli][files][errors]") {
  TempDir dir("utf8-cli");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "The log of day one: all \xff well. Caf\xc3\xa9 ok. ";
  const std::string bad = write(dir / "bad.txt", text);
  std::string pairs;
  for (int i = 0; i < 20; ++i) pairs += "caf\xc3\xa9 " + std::to_string(i) + "\t" + std::to_string(i) + "\n";
  pairs += "all \xff well\tx\n";
  const std::string bad_pairs = write(dir / "bad.tsv", pairs);
  std::string overlong_pairs = pairs;
  overlong_pairs.replace(overlong_pairs.find("\xff"), 1, "\xf0\x8f\xbf\xbf");
  const std::string overlong = write(dir / "overlong.tsv", overlong_pairs);
  const std::string run = dir / "bu";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--task text --model decoder --file " + bad + " --seq-len 16 --steps 400 --eval-every 400",
       bad + " line 1 (byte offset 24): not valid UTF-8 (byte 0xFF)"},
      {"--task pairs --file " + bad_pairs + " --steps 400", bad_pairs + " line 21 (byte offset 224): not valid UTF-8 (byte 0xFF)"},
      {"--task pairs --tokenize chars --file " + bad_pairs + " --steps 400",
       bad_pairs + " line 21 (byte offset 224): not valid UTF-8 (byte 0xFF)"},
      // An overlong 4-byte form: never decoded, so it would reach the checkpoint's JSON and fail there, with exit 1.
      {"--task pairs --file " + overlong + " --steps 400", overlong + " line 21 (byte offset 224): not valid UTF-8 (bytes 0xF0 0x8F)"},
  };
  for (const auto& [args, expected] : cases) {
    const auto start = std::chrono::steady_clock::now();
    const CliResult r = run_attnlab("train " + args + " --run " + run + kTiny, kTimeout);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    INFO(args << " -> " << r.out);
    CHECK(r.code == 2);
    CHECK(r.out.find(expected) != std::string::npos);
    CHECK(lines_of(r.out) == 1);
    CHECK(seconds < 5);  // before: 400 steps, then the failure (a bound far above a refusal's milliseconds)
    CHECK_FALSE(fs::exists(run));
  }
}

namespace {

// One input for the file tasks: a valid file with one to three edits of the
// kinds a user's file may hold (bytes of another encoding, NUL, CR LF, a BOM,
// very long lines and tokens, a cut in a character), or random bytes.
std::string fuzz_input(std::mt19937_64& rng) {
  static const std::vector<std::string> invalid = {"\xff", "\xfe", "\x80", "\xbf", "\xc3", "\xc3(", "\xc0\xaf",
                                                   "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xf8\x88\x80\x80\x80",
                                                   "\xe2\x82", "\xf0\x9f\x98"};
  static const std::vector<std::string> valid = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9d\x84\x9e", "\xef\xbb\xbf", "\r", "\t", " "};
  auto pick = [&rng](size_t n) { return static_cast<size_t>(rng() % n); };
  std::string text;
  if (rng() % 2) {
    for (int i = 0; i < 24; ++i)
      text += "w" + std::to_string(i % 7) + " caf\xc3\xa9 " + std::to_string(i) + "\t" + std::to_string(i) + " x\n";
  } else {
    for (int i = 0; i < 12; ++i) text += "The log of day " + std::to_string(i) + ": all is well. Caf\xc3\xa9 ok, 20\xe2\x82\xac.\n";
  }
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits; ++e) {
    const size_t at = pick(text.size() + 1);
    switch (rng() % 11) {
      case 0: text.insert(at, 1, static_cast<char>(rng())); break;
      case 1: text.insert(at, invalid[pick(invalid.size())]); break;
      case 2: text.insert(at, 1, '\0'); break;
      case 3: {
        std::string crlf;
        for (char c : text) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
        text = crlf;
        break;
      }
      case 4: text = "\xef\xbb\xbf" + text; break;
      case 5: {  // a very long line of short words
        std::string line;
        while (line.size() < 100000) line += "w" + std::to_string(rng() % 50) + " ";
        text.insert(at, line + "\tlong\n");
        break;
      }
      case 6: {  // a very long token, ASCII or multi-byte
        const std::string unit = rng() % 2 ? std::string("t") : valid[pick(3)];
        std::string token;
        while (token.size() < 100000) token += unit;
        text.insert(at, token);
        break;
      }
      case 7: {
        text.assign(pick(2000), '\0');
        for (char& c : text) c = static_cast<char>(rng());
        break;
      }
      case 8: text.insert(at, valid[pick(valid.size())]); break;
      case 9: text.resize(at); break;
      default: text.insert(at, "\n"); break;
    }
  }
  return text;
}

std::vector<TaskConfig> file_task_configs(const std::string& path) {
  std::vector<TaskConfig> configs(3);
  configs[0].name = configs[1].name = "pairs";
  configs[1].tokenize = Tokenize::chars;
  configs[2].name = "text";
  configs[2].seq_len = 8;
  for (TaskConfig& c : configs) c.file = path;
  return configs;
}

}  // namespace

TEST_CASE("fuzz: a file task's input is refused at load with one line naming the file, or its vocabulary and examples serialize to JSON",
          "[fuzz][datasets][files]") {
  TempDir dir("fuzz-files");
  std::mt19937_64 rng(20250114);
  int refused = 0, loaded = 0;
  for (int i = 0; i < 400; ++i) {
    const std::string path = write(dir / "input.txt", fuzz_input(rng));
    for (const TaskConfig& c : file_task_configs(path)) {
      INFO("input " << i << ", task " << c.name << " " << name_of(c.tokenize));
      std::unique_ptr<Task> task;
      try {
        task = make_task(c);
      } catch (const std::invalid_argument& e) {  // ValueError
        const std::string what = e.what();
        INFO(what.substr(0, 300));
        CHECK(what.find(path) != std::string::npos);
        CHECK(what.find('\n') == std::string::npos);
        CHECK(what.size() < 600);
        ++refused;
        continue;
      } catch (const IoError& e) {
        FAIL("IoError for a readable file: " << e.what());
      }
      // What the first checkpoint writes: the task and the vocabulary as JSON (training/checkpoints.h).
      TrainSettings s = default_settings();
      s.task = c;
      s.model.arch = Arch::decoder;
      Metadata meta;
      REQUIRE_NOTHROW(meta = checkpoint_description(s, *task));
      const auto tokens = nlohmann::json::parse(meta.at("vocabulary")).at("tokens").get<std::vector<std::string>>();
      REQUIRE(static_cast<int64_t>(tokens.size()) == task->vocab_size());
      for (int32_t id = 0; id < task->vocab_size(); ++id) CHECK(tokens[static_cast<size_t>(id)] == task->token_text(id));
      for (const Example& ex : *task->own_heldout())
        CHECK_NOTHROW(nlohmann::json({task->to_text(ex.input), task->to_text(ex.output)}).dump());
      ++loaded;
    }
  }
  // Both outcomes are exercised, or the property proves little.
  CHECK(refused > 200);
  CHECK(loaded > 200);
}

TEST_CASE("fuzz: attnlab train on a fuzzed file task exits 2 with one line and no run, or trains to the end", "[fuzz][cli][files]") {
  TempDir dir("fuzz-files-cli");
  std::mt19937_64 rng(20250115);
  int refused = 0, trained = 0;
  for (int i = 0; i < 10; ++i) {
    const std::string path = write(dir / "input.txt", fuzz_input(rng));
    for (const std::string task : {"--task pairs", "--task pairs --tokenize chars", "--task text --seq-len 8"}) {
      const std::string run = dir / "run";
      fs::remove_all(run);
      const CliResult r = run_attnlab("train " + task + " --file " + path + " --model decoder --steps 2 --eval-every 2 --run " +
                                          run + kTiny,
                                      kTimeout);
      INFO("input " << i << ", " << task << " -> " << r.code << " " << r.out.substr(0, 300));
      if (r.code == 2) {
        CHECK(lines_of(r.out) == 1);
        CHECK_FALSE(fs::exists(run));
        ++refused;
      } else {
        REQUIRE(r.code == 0);
        CHECK(fs::exists(run + "/checkpoints/step-00000002.safetensors"));
        ++trained;
      }
    }
  }
  CHECK(refused > 3);
  CHECK(trained > 3);
}
