#include "framework/io/tfevents.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstring>
#include <utility>

#include "framework/error.h"

namespace attnlab {

namespace {

std::array<std::uint32_t, 256> make_crc32c_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}

// Wire types of the protobuf encoding.
constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

template <typename T>
void put_little_endian(std::string& out, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

std::uint64_t double_bits(double v) {
  std::uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

// Field numbers of TensorBoard's messages.
namespace event_field { constexpr int wall_time = 1, step = 2, file_version = 3, summary = 5, session_log = 7; }
namespace session_log_field { constexpr int status = 1, start = 1; }  // SessionLog.status, SessionStatus.START
namespace value_field { constexpr int tag = 1, simple_value = 2, histo = 5; }
constexpr int kSummaryValue = 1;
namespace histo_field {
constexpr int min = 1, max = 2, num = 3, sum = 4, sum_squares = 5, bucket_limit = 6, bucket = 7;
}

std::string io_reason() { return std::strerror(errno); }

}  // namespace

std::uint32_t crc32c(const void* data, std::size_t size) {
  static const std::array<std::uint32_t, 256> table = make_crc32c_table();
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < size; ++i) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::uint32_t masked_crc32c(const void* data, std::size_t size) {
  const std::uint32_t c = crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

namespace protowire {

void put_varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void put_tag(std::string& out, int field, int wire_type) {
  put_varint(out, (static_cast<std::uint64_t>(field) << 3) | static_cast<std::uint64_t>(wire_type));
}

void put_int64(std::string& out, int field, std::int64_t value) {
  put_tag(out, field, kVarint);
  put_varint(out, static_cast<std::uint64_t>(value));
}

void put_double(std::string& out, int field, double value) {
  put_tag(out, field, kFixed64);
  put_little_endian(out, double_bits(value));
}

void put_float(std::string& out, int field, float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  put_tag(out, field, kFixed32);
  put_little_endian(out, bits);
}

void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_tag(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out += bytes;
}

void put_packed_doubles(std::string& out, int field, const std::vector<double>& values) {
  std::string packed;
  for (double v : values) put_little_endian(packed, double_bits(v));
  put_bytes(out, field, packed);
}

}  // namespace protowire

const std::vector<double>& Histogram::default_limits() {
  static const std::vector<double> limits = [] {
    std::vector<double> positive;
    for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) positive.push_back(v);
    positive.push_back(DBL_MAX);
    std::vector<double> all;
    for (auto it = positive.rbegin(); it != positive.rend(); ++it) all.push_back(-*it);
    all.push_back(0.0);
    all.insert(all.end(), positive.begin(), positive.end());
    return all;
  }();
  return limits;
}

Histogram Histogram::of(const std::vector<double>& values) {
  const std::vector<double>& limits = default_limits();
  std::vector<double> counts(limits.size(), 0.0);
  Histogram h;
  h.min = DBL_MAX;
  h.max = -DBL_MAX;  // TensorFlow's values for an empty histogram
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    // upper_bound: a value equal to a limit belongs to the bucket above it.
    const auto b = std::upper_bound(limits.begin(), limits.end(), v) - limits.begin();
    counts[static_cast<std::size_t>(b)] += 1;
    h.min = std::min(h.min, v);
    h.max = std::max(h.max, v);
    h.num += 1;
    h.sum += v;
    h.sum_squares += v * v;
  }
  for (std::size_t i = 0; i < counts.size();) {
    double end = limits[i], count = counts[i];
    ++i;
    if (count <= 0.0) {  // a run of empty buckets becomes one, up to the run's last limit
      while (i < counts.size() && counts[i] <= 0.0) end = limits[i++];
    }
    h.bucket_limit.push_back(end);
    h.bucket.push_back(count);
  }
  return h;
}

std::string tfrecord(const std::string& data) {
  std::string header;
  put_little_endian(header, static_cast<std::uint64_t>(data.size()));
  std::string out = header;
  put_little_endian(out, masked_crc32c(header.data(), header.size()));
  out += data;
  put_little_endian(out, masked_crc32c(data.data(), data.size()));
  return out;
}

std::string event_bytes(double wall_time, std::int64_t step, const std::string& file_version,
                        const std::string& summary) {
  std::string out;
  protowire::put_double(out, event_field::wall_time, wall_time);
  if (step != 0) protowire::put_int64(out, event_field::step, step);  // proto3 leaves defaults out
  if (!file_version.empty()) protowire::put_bytes(out, event_field::file_version, file_version);
  if (!summary.empty()) protowire::put_bytes(out, event_field::summary, summary);
  return out;
}

std::string session_start_event(double wall_time, std::int64_t step) {
  std::string log;
  protowire::put_int64(log, session_log_field::status, session_log_field::start);
  std::string out = event_bytes(wall_time, step, "", "");
  protowire::put_bytes(out, event_field::session_log, log);
  return out;
}

std::string scalar_summary(const std::string& tag, float value) {
  std::string v;
  protowire::put_bytes(v, value_field::tag, tag);
  protowire::put_float(v, value_field::simple_value, value);
  std::string out;
  protowire::put_bytes(out, kSummaryValue, v);
  return out;
}

std::string histogram_summary(const std::string& tag, const Histogram& h) {
  std::string histo;
  protowire::put_double(histo, histo_field::min, h.min);
  protowire::put_double(histo, histo_field::max, h.max);
  protowire::put_double(histo, histo_field::num, h.num);
  protowire::put_double(histo, histo_field::sum, h.sum);
  protowire::put_double(histo, histo_field::sum_squares, h.sum_squares);
  protowire::put_packed_doubles(histo, histo_field::bucket_limit, h.bucket_limit);
  protowire::put_packed_doubles(histo, histo_field::bucket, h.bucket);
  std::string v;
  protowire::put_bytes(v, value_field::tag, tag);
  protowire::put_bytes(v, value_field::histo, histo);
  std::string out;
  protowire::put_bytes(out, kSummaryValue, v);
  return out;
}

double TfEventsWriter::system_clock_seconds() {
  using namespace std::chrono;
  return duration_cast<duration<double>>(system_clock::now().time_since_epoch()).count();
}

TfEventsWriter::TfEventsWriter(const std::string& dir, Clock clock) : clock_(std::move(clock)) {
  const double now = clock_();
  const std::string base =
      dir + "/events.out.tfevents." + std::to_string(static_cast<long long>(std::floor(now))) + ".attnlab";
  // "x": create only, never truncate a file that is already there.
  for (int n = 0; n < 1000 && file_ == nullptr; ++n) {
    path_ = n == 0 ? base : base + "." + std::to_string(n);
    file_ = std::fopen(path_.c_str(), "wbx");
    if (file_ == nullptr && errno != EEXIST) {
      throw IoError("cannot create event file " + path_ + ": " + io_reason());
    }
  }
  if (file_ == nullptr) throw IoError("cannot create event file " + base + ": every name is taken");
  write_record(event_bytes(now, 0, "brain.Event:2", ""));
}

TfEventsWriter::TfEventsWriter(TfEventsWriter&& other) noexcept
    : path_(std::move(other.path_)), file_(std::exchange(other.file_, nullptr)), clock_(std::move(other.clock_)) {}

TfEventsWriter& TfEventsWriter::operator=(TfEventsWriter&& other) noexcept {
  if (this != &other) {
    if (file_ != nullptr) std::fclose(file_);
    path_ = std::move(other.path_);
    file_ = std::exchange(other.file_, nullptr);
    clock_ = std::move(other.clock_);
  }
  return *this;
}

TfEventsWriter::~TfEventsWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void TfEventsWriter::scalar(const std::string& tag, std::int64_t step, double value) {
  write_record(event_bytes(clock_(), step, "", scalar_summary(tag, static_cast<float>(value))));
}

void TfEventsWriter::histogram(const std::string& tag, std::int64_t step, const std::vector<double>& values) {
  write_record(event_bytes(clock_(), step, "", histogram_summary(tag, Histogram::of(values))));
}

void TfEventsWriter::session_start(std::int64_t step) { write_record(session_start_event(clock_(), step)); }

void TfEventsWriter::write_record(const std::string& event) {
  if (file_ == nullptr) throw IoError("event file " + path_ + " is closed");
  const std::string record = tfrecord(event);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size() || std::fflush(file_) != 0) {
    throw IoError("cannot write event file " + path_ + ": " + io_reason());
  }
}

}  // namespace attnlab
