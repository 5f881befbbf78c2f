// Seeded mutation fuzzing of the two parsers a user can feed arbitrary bytes:
// the checkpoint loader (decode_safetensors, then load_checkpoint's format,
// version, checksum and shape checks) and the train command's config file.
// Each input is a valid file with a few random mutations; the inputs are
// fixed by the seed, their number bounds the time. The properties:
//   - nothing crashes, and the only errors are the typed ones (IoError,
//     ValueError; for the CLI: exit code 2 and one line);
//   - a checkpoint either loads bitwise the weights that were saved, or is
//     refused and leaves the model and optimizer untouched. A mutation that
//     loads different numbers would be corruption gone unnoticed.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include "framework/io/checkpoint.h"
#include "framework/io/safetensors.h"
#include "models/sequence_model.h"
#include "tests/cli_harness.h"
#include "tests/fixtures.h"

using namespace attnlab;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kSeed = 20240607;
constexpr int kDecodeInputs = 4000;      // decode_safetensors alone
constexpr int kCheckpointInputs = 2000;  // load_checkpoint: files on disk, all checks
constexpr int kConfigInputs = 300;       // attnlab train --check: one process each

// Applies one to three random edits: bit flips, byte overwrites, truncation,
// deletion, insertion, duplication, a new header length, and edits aimed at
// the JSON header (digits swapped for digits, bytes swapped).
std::string mutate(std::string bytes, std::mt19937_64& rng) {
  auto pick = [&rng](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  const uint64_t header_len = bytes.size() >= 8 ? [&] {
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
    return n;
  }() : 0;
  const size_t header_end = std::min(bytes.size(), static_cast<size_t>(8 + std::min<uint64_t>(header_len, bytes.size())));
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits; ++e) {
    switch (rng() % 9) {
      case 0:
        if (!bytes.empty()) bytes[pick(bytes.size())] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:
        if (!bytes.empty()) bytes[pick(bytes.size())] = static_cast<char>(rng());
        break;
      case 2:
        bytes.resize(pick(bytes.size() + 1));
        break;
      case 3: {
        const size_t at = pick(bytes.size() + 1);
        bytes.erase(at, 1 + pick(16));
        break;
      }
      case 4: {
        std::string noise(1 + pick(8), '\0');
        for (char& c : noise) c = static_cast<char>(rng());
        bytes.insert(pick(bytes.size() + 1), noise);
        break;
      }
      case 5: {
        const size_t at = pick(bytes.size() + 1);
        bytes.insert(pick(bytes.size() + 1), bytes.substr(at, 1 + pick(64)));
        break;
      }
      case 6:
        if (bytes.size() >= 8) {
          const uint64_t n = rng() % 2 ? header_len + (rng() % 17) - 8 : rng();
          for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
        }
        break;
      case 7:  // a number in the header (a shape, an offset, a step) changes
        for (int tries = 0; tries < 32 && header_end > 8; ++tries) {
          const size_t at = 8 + pick(std::min(header_end, bytes.size()) - 8);
          if (at < bytes.size() && std::isdigit(static_cast<unsigned char>(bytes[at]))) {
            bytes[at] = static_cast<char>('0' + rng() % 10);
            break;
          }
        }
        break;
      default:  // two header bytes trade places
        if (header_end > 9 && header_end <= bytes.size())
          std::swap(bytes[8 + pick(header_end - 8)], bytes[8 + pick(header_end - 8)]);
        break;
    }
  }
  return bytes;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Plain writes: write_file_atomic's fsync would make thousands of inputs slow.
// A new file each time, since ext4 flushes a file truncated and rewritten on close.
void put_bytes(const std::string& path, const std::string& bytes) {
  std::error_code ec;
  fs::remove(path, ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

std::unique_ptr<SequenceModel> tiny_model(uint64_t seed) {
  return make_model(testing::model_config("decoder", 8, 16, 8, 2, 1, 16), seed);
}

std::vector<Tensor> values_of(const Module& m) {
  std::vector<Tensor> out;
  for (const auto& [name, v] : m.named_parameters()) out.push_back(v.value());
  return out;
}

bool same(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].shape() != b[i].shape() ||
        (a[i].numel() > 0 &&
         std::memcmp(a[i].data(), b[i].data(), sizeof(Real) * static_cast<size_t>(a[i].numel())) != 0))
      return false;
  return true;
}

void fill(Module& m, Real value) {
  for (auto& [name, v] : m.named_parameters()) v.value().flat().setConstant(value);
}

}  // namespace

TEST_CASE("fuzz: decode_safetensors on mutated checkpoints never crashes and throws only IoError", "[fuzz][io]") {
  const std::string dir = (fs::temp_directory_path() / ("attnlab-fuzz-decode-" + std::to_string(::getpid()))).string();
  fs::create_directories(dir);
  auto model = tiny_model(1);
  save_checkpoint(dir + "/ck", *model, nullptr, {{"step", "7"}});
  const std::string valid = file_bytes(model_path(dir + "/ck"));
  fs::remove_all(dir);
  REQUIRE_NOTHROW(decode_safetensors(valid, "valid"));

  std::mt19937_64 rng(kSeed);
  int refused = 0, loaded = 0;
  for (int i = 0; i < kDecodeInputs; ++i) {
    const std::string bytes = mutate(valid, rng);
    try {
      decode_safetensors(bytes, "fuzz");
      ++loaded;
    } catch (const IoError&) {
      ++refused;
    } catch (const std::exception& e) {
      FAIL("input " << i << ": untyped exception " << typeid(e).name() << ": " << e.what());
    }
  }
  INFO(refused << " refused, " << loaded << " decoded");
  CHECK(refused + loaded == kDecodeInputs);
  CHECK(refused > kDecodeInputs / 2);  // the mutations do reach the checks
}

TEST_CASE("fuzz: load_checkpoint loads exactly the saved weights or refuses a mutated file and changes nothing",
          "[fuzz][io]") {
  const std::string dir = (fs::temp_directory_path() / ("attnlab-fuzz-load-" + std::to_string(::getpid()))).string();
  fs::create_directories(dir);
  const std::string stem = dir + "/step-00000007";
  auto saved = tiny_model(1);
  OptimizerConfig oc;
  auto saved_opt = make_optimizer(oc, saved->named_parameters());
  const Metadata metadata = {{"step", "7"}, {"model_config", saved->config().to_json().dump()}};
  save_checkpoint(stem, *saved, saved_opt.get(), metadata);
  const std::string valid_model = file_bytes(model_path(stem));
  const std::string valid_optim = file_bytes(optimizer_path(stem));
  const std::vector<Tensor> expected = values_of(*saved);

  auto model = tiny_model(2);
  auto optimizer = make_optimizer(oc, model->named_parameters());
  const NamedTensors optimizer_before = optimizer->state();
  std::mt19937_64 rng(kSeed + 1);
  int refused = 0, loaded = 0;
  for (int i = 0; i < kCheckpointInputs; ++i) {
    // Mostly the model file; every fourth input the optimizer's instead.
    const bool optim_turn = i % 4 == 3;
    put_bytes(model_path(stem), optim_turn ? valid_model : mutate(valid_model, rng));
    put_bytes(optimizer_path(stem), optim_turn ? mutate(valid_optim, rng) : valid_optim);
    fill(*model, Real(0.5));
    const std::vector<Tensor> sentinel = values_of(*model);
    try {
      Metadata got = load_checkpoint(stem, *model, optimizer.get());
      ++loaded;
      INFO("input " << i << " loaded");
      REQUIRE(same(values_of(*model), expected));
      REQUIRE(got.at("step") == "7");
      REQUIRE(got.at("model_config") == metadata.at("model_config"));
    } catch (const IoError&) {
      ++refused;
    } catch (const ValueError&) {
      ++refused;
    } catch (const std::exception& e) {
      FAIL("input " << i << ": untyped exception " << typeid(e).name() << ": " << e.what());
    }
    if (!same(values_of(*model), sentinel)) REQUIRE(same(values_of(*model), expected));
  }
  // Refused or loaded, the optimizer holds a valid state: the fresh one, which the saved one equals.
  const NamedTensors optimizer_after = optimizer->state();
  REQUIRE(optimizer_after.size() == optimizer_before.size());
  for (size_t k = 0; k < optimizer_after.size(); ++k) {
    REQUIRE(optimizer_after[k].first == optimizer_before[k].first);
    REQUIRE(same({optimizer_after[k].second}, {optimizer_before[k].second}));
  }
  fs::remove_all(dir);
  INFO(refused << " refused, " << loaded << " loaded");
  CHECK(refused + loaded == kCheckpointInputs);
  CHECK(refused > kCheckpointInputs / 2);
}

TEST_CASE("fuzz: attnlab train --check on mutated config files exits 0 or 2 with one line, never crashes",
          "[fuzz][cli]") {
  using attnlab::testing::run_attnlab;
  attnlab::testing::TempDir dir("fuzz-config");
  const std::string flags =
      " --task reverse --vocab 6 --min-len 5 --max-len 5 --d-model 16 --heads 2 --layers 1 --d-ff 32 --batch-size 8"
      " --heldout 50";
  auto base_run = run_attnlab("train --check" + flags + " --run " + (dir / "never"));
  INFO(base_run.out);
  REQUIRE(base_run.code == 0);
  std::vector<std::string> lines;
  {
    std::istringstream in(base_run.out);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  REQUIRE(lines.size() > 20);
  const std::vector<std::string> values = {
      "", "0", "-1", "1", "2", "3", "7", "64", "1e3", "0.5", "-0.5", "1e-300", "1e300", "1e999", "nan", "inf", "-inf",
      "99999999999999999999", "9223372036854775807", "-9223372036854775808", "0x10", "true", "false", "yes", "abc",
      "sgd", "adam", "noam", "cosine", "rope", "learned", "decoder", "seq2seq", "encoder", "copy", "add", "sort",
      "\xff\xfe", "\xc3\xa9", "4 5", "=", "#", "\"1\"", "2000000"};
  const std::vector<std::string> keys = {"steps", "d-model", "heads", "d-k", "vocab", "min-len", "max-len", "lr",
                                         "optimizer", "schedule", "warmup", "min-lr", "momentum", "positional",
                                         "model", "task", "nosuchkey", "run", "resume", "config", "help", "[x]",
                                         "threads", "batch-size", "heldout", "dropout", "beta1", "attn-scale"};
  std::mt19937_64 rng(kSeed + 2);
  auto pick = [&rng](size_t n) { return static_cast<size_t>(rng() % n); };
  int refused = 0, accepted = 0;
  const std::string path = dir / "fuzz.ini";
  for (int i = 0; i < kConfigInputs; ++i) {
    std::vector<std::string> ls = lines;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      std::string& line = ls[pick(ls.size())];
      const size_t eq = line.find(" = ");
      switch (rng() % 7) {
        case 0:
          if (eq != std::string::npos) line = line.substr(0, eq + 3) + values[pick(values.size())];
          break;
        case 1:
          if (eq != std::string::npos) line = keys[pick(keys.size())] + line.substr(eq);
          break;
        case 2:
          line.clear();
          break;
        case 3:
          ls.push_back(ls[pick(ls.size())]);  // a repeated key
          break;
        case 4:
          if (eq != std::string::npos) line.erase(eq, 3);
          break;
        case 5:
          if (!line.empty()) line[pick(line.size())] = static_cast<char>(rng());
          break;
        default:
          ls.insert(ls.begin() + static_cast<std::ptrdiff_t>(pick(ls.size())), keys[pick(keys.size())] + " = " +
                                                                               values[pick(values.size())]);
          break;
      }
    }
    std::string text;
    for (const std::string& l : ls) text += l + "\n";
    put_bytes(path, text);
    auto r = run_attnlab("train --check --config " + path + " --run " + (dir / "never"));
    INFO("input " << i << ":\n" << text << "-> exit " << r.code << ": " << r.out);
    REQUIRE((r.code == 0 || r.code == 2));
    if (r.code == 2) {
      ++refused;
      REQUIRE(r.out.rfind("attnlab train: ", 0) == 0);
      REQUIRE(std::count(r.out.begin(), r.out.end(), '\n') == 1);
      REQUIRE(r.out.find("internal error") == std::string::npos);
    } else {
      ++accepted;
    }
    REQUIRE_FALSE(fs::exists(dir / "never"));
  }
  INFO(refused << " refused, " << accepted << " accepted");
  CHECK(refused + accepted == kConfigInputs);
  CHECK(refused > 0);
  CHECK(accepted > 0);
}
