// TensorBoard event files: CRC-32C, the protobuf wire format, the histogram
// buckets, and files written to disk. scripts/checks/check_tfevents.py parses what
// the hidden "[.tfevents_fixture]" case writes with TensorBoard's own .proto
// files (the ctest test tfevents_records_parse_with_tensorboards_official_protos).
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "framework/error.h"
#include "framework/io/csv.h"
#include "framework/io/tfevents.h"
#include "tests/cli_harness.h"

using namespace attnlab;
using attnlab::testing::TempDir;

namespace {

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    if (!out.empty()) out += ' ';
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string varint(std::uint64_t v) {
  std::string out;
  protowire::put_varint(out, v);
  return out;
}

std::uint64_t read_u64(const std::string& s, std::size_t at) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

std::uint32_t read_u32(const std::string& s, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

// The payloads of a TFRecord file, each record's framing and both CRCs checked.
std::vector<std::string> read_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < all.size()) {
    REQUIRE(at + 12 <= all.size());
    const std::uint64_t n = read_u64(all, at);
    REQUIRE(read_u32(all, at + 8) == masked_crc32c(all.data() + at, 8));
    REQUIRE(at + 12 + n + 4 <= all.size());
    const std::string data = all.substr(at + 12, n);
    REQUIRE(read_u32(all, at + 12 + n) == masked_crc32c(data.data(), data.size()));
    out.push_back(data);
    at += 12 + n + 4;
  }
  return out;
}

std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("crc32c matches the published check values of CRC-32C (Castagnoli)", "[tfevents]") {
  const std::string digits = "123456789";
  CHECK(crc32c(digits.data(), digits.size()) == 0xE3069283u);
  // RFC 3720 (iSCSI) B.4 test vectors.
  const std::string zeros(32, '\0'), ones(32, '\xFF');
  CHECK(crc32c(zeros.data(), zeros.size()) == 0x8A9136AAu);
  CHECK(crc32c(ones.data(), ones.size()) == 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  CHECK(crc32c(ascending.data(), ascending.size()) == 0x46DD794Eu);
  CHECK(crc32c("", 0) == 0u);
}

TEST_CASE("masked_crc32c rotates the CRC right by 15 bits and adds TFRecord's constant", "[tfevents]") {
  const std::string digits = "123456789";
  // 0xE3069283 rotated right by 15 is 0x2507C60D; plus 0xA282EAD8 (mod 2^32).
  CHECK(masked_crc32c(digits.data(), digits.size()) == 0xC78AB0E5u);
}

TEST_CASE("varints use 7 bits a byte, low group first, and negative int64 takes ten bytes", "[tfevents]") {
  CHECK(hex(varint(0)) == "00");
  CHECK(hex(varint(1)) == "01");
  CHECK(hex(varint(127)) == "7f");
  CHECK(hex(varint(128)) == "80 01");
  CHECK(hex(varint(150)) == "96 01");  // the protobuf documentation's example
  CHECK(hex(varint(300)) == "ac 02");
  CHECK(hex(varint(UINT64_MAX)) == "ff ff ff ff ff ff ff ff ff 01");
  std::string neg;
  protowire::put_int64(neg, 2, -1);
  CHECK(hex(neg) == "10 ff ff ff ff ff ff ff ff ff 01");
}

TEST_CASE("a scalar summary is Summary.value{tag, simple_value as fixed32} byte for byte", "[tfevents]") {
  // value (field 1, length 8) { tag (1) "a", simple_value (2, fixed32) 1.0f = 0x3f800000 }
  CHECK(hex(scalar_summary("a", 1.0f)) == "0a 08 0a 01 61 15 00 00 80 3f");
}

TEST_CASE("an event is wall_time fixed64, step varint, file_version and summary length-delimited", "[tfevents]") {
  // wall_time 2.0 = 0x4000000000000000; step 3; summary bytes "xy"
  CHECK(hex(event_bytes(2.0, 3, "", "xy")) == "09 00 00 00 00 00 00 00 40 10 03 2a 02 78 79");
  CHECK(hex(event_bytes(0.5, 0, "v", "")) == "09 00 00 00 00 00 00 e0 3f 1a 01 76");
}

TEST_CASE("a record is length, its masked CRC, the data and the data's masked CRC", "[tfevents]") {
  const std::string record = tfrecord("abc");
  REQUIRE(record.size() == 8 + 4 + 3 + 4);
  CHECK(read_u64(record, 0) == 3u);
  CHECK(read_u32(record, 8) == masked_crc32c(record.data(), 8));
  CHECK(record.substr(12, 3) == "abc");
  CHECK(read_u32(record, 15) == masked_crc32c("abc", 3));
}

TEST_CASE("histogram buckets are TensorFlow's default limits and empty runs merge into the next limit",
          "[tfevents]") {
  const auto& limits = Histogram::default_limits();
  // 774 limits from 1e-12 up by 10% below 1e20, and DBL_MAX; their negatives; and 0.
  REQUIRE(limits.size() == 1551);
  CHECK(limits.front() == -DBL_MAX);
  CHECK(limits.back() == DBL_MAX);
  CHECK(limits[774] == -1.0e-12);
  CHECK(limits[775] == 0.0);
  CHECK(limits[776] == 1.0e-12);
  CHECK(limits[777] == 1.0e-12 * 1.1);
  CHECK(limits[1549] < 1.0e20);
  CHECK(limits[1549] * 1.1 >= 1.0e20);

  const Histogram h = Histogram::of({0.0, 1.0, 1.0, -2.0, NAN, INFINITY});
  CHECK(h.num == 4);  // the non-finite values are left out
  CHECK(h.min == -2.0);
  CHECK(h.max == 1.0);
  CHECK(h.sum == 0.0);
  CHECK(h.sum_squares == 6.0);
  // Buckets: [..empty..,-2 lies in [limit(k-1), limit(k)), empty.., 0 in [0, 1e-12), empty.., 1 in one bucket, empty]
  REQUIRE(h.bucket.size() == h.bucket_limit.size());
  double total = 0;
  for (double c : h.bucket) total += c;
  CHECK(total == 4);
  std::vector<double> nonempty_limits;
  for (std::size_t i = 0; i < h.bucket.size(); ++i) {
    if (h.bucket[i] > 0) nonempty_limits.push_back(h.bucket_limit[i]);
  }
  REQUIRE(nonempty_limits.size() == 3);
  CHECK(nonempty_limits[1] == 1.0e-12);  // 0 counts in [0, 1e-12): the limit above it
  CHECK(nonempty_limits[0] > -2.0);
  CHECK(nonempty_limits[0] <= -2.0 / 1.1 * 1.0000001);
  CHECK(nonempty_limits[2] > 1.0);
  CHECK(nonempty_limits[2] <= 1.1 * 1.0000001);
  // Empty buckets between them are one entry each: 3 full + 4 empty runs.
  CHECK(h.bucket.size() == 7);
  CHECK(h.bucket_limit.back() == DBL_MAX);
}

TEST_CASE("an empty histogram is one empty bucket up to DBL_MAX, as TensorFlow writes it", "[tfevents]") {
  const Histogram h = Histogram::of({});
  CHECK(h.num == 0);
  REQUIRE(h.bucket.size() == 1);
  CHECK(h.bucket_limit[0] == DBL_MAX);
  CHECK(h.bucket[0] == 0);
}

TEST_CASE("TfEventsWriter writes a file_version record then one CRC-checked record per call", "[tfevents]") {
  TempDir dir("tfevents-write");
  std::string path;
  {
    TfEventsWriter writer(dir.path.string(), [] { return 1700000000.25; });
    path = writer.path();
    writer.scalar("loss", 1, 2.5);
    writer.scalar("loss", 2, 1.5);
    writer.histogram("grad_norm", 2, {0.1, 0.2, 0.3});
    // Flushed at each call: the records are on disk before the writer closes.
    CHECK(read_records(path).size() == 4);
  }
  CHECK(event_files(dir.path.string()) == std::vector<std::string>{"events.out.tfevents.1700000000.attnlab"});
  const auto records = read_records(path);
  REQUIRE(records.size() == 4);
  CHECK(records[0] == event_bytes(1700000000.25, 0, "brain.Event:2", ""));
  CHECK(records[1] == event_bytes(1700000000.25, 1, "", scalar_summary("loss", 2.5f)));
  CHECK(records[2] == event_bytes(1700000000.25, 2, "", scalar_summary("loss", 1.5f)));
  CHECK(records[3] == event_bytes(1700000000.25, 2, "", histogram_summary("grad_norm", Histogram::of({0.1, 0.2, 0.3}))));
}

TEST_CASE("TfEventsWriter never overwrites an event file: a taken name gets .1, .2", "[tfevents]") {
  TempDir dir("tfevents-taken");
  const std::string taken = dir / "events.out.tfevents.1700000000.attnlab";
  { std::ofstream(taken) << "not ours"; }
  TfEventsWriter first(dir.path.string(), [] { return 1700000000.0; });
  TfEventsWriter second(dir.path.string(), [] { return 1700000000.0; });
  CHECK(first.path() == taken + ".1");
  CHECK(second.path() == taken + ".2");
  std::ifstream in(taken);
  std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(kept == "not ours");
}

TEST_CASE("TfEventsWriter refuses a missing directory with an IoError naming the path", "[tfevents]") {
  TempDir dir("tfevents-missing");
  const std::string missing = dir / "no/such/dir";
  try {
    TfEventsWriter writer(missing, [] { return 5.0; });
    FAIL("no error");
  } catch (const IoError& e) {
    CHECK(std::string(e.what()).find(missing + "/events.out.tfevents.5.attnlab") != std::string::npos);
  }
  CHECK(!std::filesystem::exists(missing));
}

// Not run by default: scripts/checks/check_tfevents.py runs it with
// ATTNLAB_TFEVENTS_FIXTURE=DIR, then parses DIR's event file with the official
// .proto definitions and compares it with DIR/expected.json (the values handed in)
// and with DIR/metrics.csv (the scalars as a run's metrics.csv would hold them).
TEST_CASE("write an event file and the values handed to it for check_tfevents.py", "[.tfevents_fixture]") {
  const char* out = std::getenv("ATTNLAB_TFEVENTS_FIXTURE");
  REQUIRE(out != nullptr);
  std::mt19937 rng(17);
  std::normal_distribution<double> normal(0.0, 1.0);
  nlohmann::json expected = {{"scalars", nlohmann::json::array()}, {"histograms", nlohmann::json::array()}};
  TfEventsWriter writer(out);
  const std::vector<std::string> tags = {"loss", "accuracy/token", "grad_norm/blocks.0.attn.q_proj.weight"};
  // The same scalars as a metrics.csv, for check_tfevents.py --run.
  std::vector<std::string> columns = {"step"};
  columns.insert(columns.end(), tags.begin(), tags.end());
  CsvWriter metrics(std::string(out) + "/metrics.csv", columns);
  for (int step = 1; step <= 5; ++step) {
    std::vector<double> row = {static_cast<double>(step)};
    for (const auto& tag : tags) {
      const double v = std::exp(normal(rng)) * (tag == "loss" ? 3.0 : 1.0);
      writer.scalar(tag, step, v);
      expected["scalars"].push_back({{"tag", tag}, {"step", step}, {"value", v}});
      row.push_back(v);
    }
    metrics.row(row);
    std::vector<double> values;
    for (int i = 0; i < 50 * step; ++i) values.push_back(normal(rng) * std::pow(10.0, step - 3));
    values.push_back(0.0);
    writer.histogram("entropy/layer0", step, values);
    expected["histograms"].push_back({{"tag", "entropy/layer0"}, {"step", step}, {"values", values}});
  }
  writer.scalar("big_step", 1LL << 40, -0.5);
  expected["scalars"].push_back({{"tag", "big_step"}, {"step", 1LL << 40}, {"value", -0.5}});
  expected["path"] = writer.path();
  std::ofstream(std::string(out) + "/expected.json") << expected.dump();
}
