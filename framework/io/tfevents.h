#pragma once
// TensorBoard event files, written without a protobuf library.
//
// A file is a sequence of records, each
//   uint64 length (little endian), uint32 masked CRC-32C of those 8 bytes,
//   `length` bytes of a serialized tensorboard.Event, uint32 masked CRC-32C of them.
// The first record carries file_version "brain.Event:2"; each later one a
// Summary of one scalar (simple_value) or one histogram (HistogramProto), or
// (a resumed run) a SessionLog START.
// Field numbers are those of TensorBoard's event.proto, summary.proto and
// histogram.proto (copies in tests/data/tensorboard/, which the suite parses
// our files with).
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace attnlab {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord uses it.
std::uint32_t crc32c(const void* data, std::size_t size);
// TFRecord's masking, so that a CRC of data that holds CRCs is still strong.
std::uint32_t masked_crc32c(const void* data, std::size_t size);

// The protobuf wire format, only as much as an Event needs.
namespace protowire {
void put_varint(std::string& out, std::uint64_t value);
void put_tag(std::string& out, int field, int wire_type);
void put_int64(std::string& out, int field, std::int64_t value);  // varint; negative as 10 bytes
void put_double(std::string& out, int field, double value);       // fixed64
void put_float(std::string& out, int field, float value);         // fixed32
void put_bytes(std::string& out, int field, const std::string& bytes);  // length-delimited
void put_packed_doubles(std::string& out, int field, const std::vector<double>& values);
}  // namespace protowire

// A tensorboard.HistogramProto. Bucket i counts the values in
// [bucket_limit[i-1], bucket_limit[i]) (from -DBL_MAX for i = 0).
struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit;
  std::vector<double> bucket;

  // TensorBoard's (TensorFlow's) default buckets: limits growing by 10% from
  // 1e-12 to 1e20, mirrored for negatives, with 0 and ±DBL_MAX; encoded as
  // TensorFlow encodes them, each run of empty buckets merged into the next
  // limit, so a histogram is a few entries, not 1551. Non-finite values are
  // left out (TensorBoard cannot place them): `num` counts the finite ones.
  static Histogram of(const std::vector<double>& values);
  // The 1551 limits above, ascending.
  static const std::vector<double>& default_limits();
};

// One record's bytes, framing and CRCs included.
std::string tfrecord(const std::string& data);
// A serialized Event. `summary` is a serialized Summary ("" for none).
std::string event_bytes(double wall_time, std::int64_t step, const std::string& file_version,
                        const std::string& summary);
std::string scalar_summary(const std::string& tag, float value);
// A serialized Event holding a SessionLog with status START.
std::string session_start_event(double wall_time, std::int64_t step);
std::string histogram_summary(const std::string& tag, const Histogram& histogram);

class TfEventsWriter {
 public:
  using Clock = std::function<double()>;  // seconds since the epoch

  // Creates `dir`/events.out.tfevents.<unix seconds>.attnlab (".1", ".2"...
  // appended when that name is taken, since TensorBoard reads every file of a
  // directory in name order and we never overwrite one) and writes the
  // file_version record. IoError naming the path when it cannot.
  explicit TfEventsWriter(const std::string& dir, Clock clock = system_clock_seconds);
  TfEventsWriter(TfEventsWriter&& other) noexcept;
  TfEventsWriter& operator=(TfEventsWriter&& other) noexcept;
  TfEventsWriter(const TfEventsWriter&) = delete;
  TfEventsWriter& operator=(const TfEventsWriter&) = delete;
  ~TfEventsWriter();

  // Each call writes one record and flushes it, so a crash loses at most the
  // record being written. IoError naming the path when a write fails.
  void scalar(const std::string& tag, std::int64_t step, double value);
  void histogram(const std::string& tag, std::int64_t step, const std::vector<double>& values);
  // A SessionLog START at `step`: TensorBoard (for files of version 2) then
  // drops the events of this directory at `step` and later that earlier files
  // hold, so a resumed run's redone steps replace a killed run's.
  void session_start(std::int64_t step);

  const std::string& path() const { return path_; }
  static double system_clock_seconds();

 private:
  void write_record(const std::string& event);

  std::string path_;
  std::FILE* file_ = nullptr;
  Clock clock_;
};

}  // namespace attnlab
