// File IO: atomic writes, the safetensors format (round trips, a file written
// by an independent numpy implementation, and every kind of corrupt file),
// and CSV logs.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "framework/io/atomic_file.h"
#include "framework/io/csv.h"
#include "framework/io/safetensors.h"

using namespace attnlab;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// A fresh directory under the system temp dir, removed with its content.
struct TempDir {
  std::string path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "attnlab_io_XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return path + "/" + name; }
  size_t entries() const { return static_cast<size_t>(std::distance(fs::directory_iterator(path), fs::directory_iterator())); }
};

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  // memcmp on the null data() of an empty tensor is undefined even for 0 bytes (UBSan).
  return a.shape() == b.shape() && (a.numel() == 0 || std::memcmp(a.data(), b.data(), sizeof(Real) * a.numel()) == 0);
}

// A safetensors file from a raw header text and `data_bytes` zero bytes.
std::string raw_file(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + std::string(data_bytes, '\0');
}

}  // namespace

TEST_CASE("write_file_atomic replaces a file's content and leaves no temporary file", "[io]") {
  TempDir dir;
  const std::string path = dir.file("a.bin");
  write_file_atomic(path, "first");
  write_file_atomic(path, std::string("se\0cond", 7));
  REQUIRE(read_file(path) == std::string("se\0cond", 7));
  REQUIRE(dir.entries() == 1);
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  REQUIRE((st.st_mode & 0777) == 0644);  // not mkstemp's 0600
}

TEST_CASE("write_file_atomic failures throw IoError naming the path and keep the previous file", "[io]") {
  TempDir dir;
  SECTION("nonexistent directory") {
    const std::string path = dir.file("missing/sub/x.bin");
    REQUIRE_THROWS_AS(write_file_atomic(path, "x"), IoError);
    REQUIRE_THROWS_WITH(write_file_atomic(path, "x"), Contains(path) && Contains(std::strerror(ENOENT)));
  }
  SECTION("a write that fails midway (file size limit) removes the temporary file") {
    const std::string path = dir.file("keep.bin");
    write_file_atomic(path, "previous content");
    // RLIMIT_FSIZE makes write() fail with EFBIG even for root, once SIGXFSZ is ignored.
    rlimit old_limit;
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit small = old_limit;
    small.rlim_cur = 4096;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    std::string message;
    try {
      write_file_atomic(path, std::string(100000, 'z'));
    } catch (const IoError& e) {
      message = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &old_limit);
    std::signal(SIGXFSZ, old_handler);
    REQUIRE_THAT(message, Contains(path) && Contains(std::strerror(EFBIG)));
    REQUIRE(read_file(path) == "previous content");
    REQUIRE(dir.entries() == 1);
  }
  SECTION("renaming over a non-empty directory fails and removes the temporary file") {
    const std::string path = dir.file("occupied");
    fs::create_directory(path);
    write_file_atomic(path + "/inside", "x");
    REQUIRE_THROWS_WITH(write_file_atomic(path, "y"), Contains(path) && Contains("renaming"));
    REQUIRE(dir.entries() == 1);
    REQUIRE(read_file(path + "/inside") == "x");
  }
  SECTION("unwritable directory") {
    const std::string path = dir.file("ro/keep.bin");
    fs::create_directory(dir.file("ro"));
    write_file_atomic(path, "previous content");
    fs::permissions(dir.file("ro"), fs::perms::owner_read | fs::perms::owner_exec);
    if (::access(dir.file("ro").c_str(), W_OK) == 0) {
      WARN("running with permission to write anyway (root): the unwritable-directory case is not exercised");
    } else {
      REQUIRE_THROWS_WITH(write_file_atomic(path, "new"), Contains(path) && Contains(std::strerror(EACCES)));
      REQUIRE(read_file(path) == "previous content");
    }
    fs::permissions(dir.file("ro"), fs::perms::owner_all);
  }
}

TEST_CASE("read_file names the path of a missing file", "[io]") {
  REQUIRE_THROWS_WITH(read_file("/nonexistent/attnlab/file"),
                      Contains("/nonexistent/attnlab/file") && Contains(std::strerror(ENOENT)));
}

TEST_CASE("safetensors round trip keeps names, order, shapes (0-d and empty), values and metadata", "[io]") {
  TempDir dir;
  const Tensor w = Tensor::from({2, 3}, {1.5f, -2.25f, 3e-8f, 1e30f, -0.0f, 7});
  const Tensor scalar = Tensor::from({}, {42});
  const Tensor empty({0, 4});
  const Tensor v = Tensor::from({3}, {0.1f, 0.2f, 0.3f});
  const std::string path = dir.file("model.safetensors");
  save_safetensors(path, {{"z.weight", &w}, {"step", &scalar}, {"empty", &empty}, {"a.bias", &v}},
                   {{"arch", "encoder"}, {"note", "quotes \" and unicode \xc3\xa9"}});

  const std::string bytes = read_file(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  REQUIRE(n % 8 == 0);  // data 8-byte aligned
  REQUIRE(bytes.size() == 8 + n + 4 * (6 + 1 + 0 + 3));

  const SafetensorsData back = load_safetensors(path);
  REQUIRE(back.tensors.size() == 4);
  const char* names[] = {"z.weight", "step", "empty", "a.bias"};  // the order given, not sorted
  const Tensor* originals[] = {&w, &scalar, &empty, &v};
  for (size_t i = 0; i < 4; ++i) {
    INFO(names[i]);
    REQUIRE(back.tensors[i].first == names[i]);
    REQUIRE(bitwise_equal(back.tensors[i].second, *originals[i]));
  }
  REQUIRE(back.tensors[1].second.dim() == 0);
  REQUIRE(back.metadata.size() == 2);
  REQUIRE(back.metadata.at("note") == "quotes \" and unicode \xc3\xa9");
  REQUIRE(back.find("a.bias") != nullptr);
  REQUIRE(back.find("nope") == nullptr);
}

TEST_CASE("safetensors written by an independent numpy implementation load correctly (F32 and F64)", "[io]") {
  // tests/data/io_python_written.safetensors, from scripts/checks/check_safetensors.py --write:
  // header keys sorted, data in another order, one F64 tensor, padded header.
  const SafetensorsData d = load_safetensors(std::string(ATTNLAB_TEST_DATA) + "/io_python_written.safetensors");
  REQUIRE(d.tensors.size() == 4);
  REQUIRE(d.tensors[0].first == "c.f64");  // in data order
  REQUIRE(d.tensors[1].first == "b.matrix");
  REQUIRE(d.tensors[2].first == "a.scalar");
  REQUIRE(d.tensors[3].first == "empty");
  const Tensor& c = d.tensors[0].second;
  REQUIRE(c.shape() == Shape{4});
  REQUIRE(c[0] == static_cast<Real>(0.1));  // F64 converted to Real
  REQUIRE(c[1] == Real(-2.5));
  REQUIRE(c[2] == static_cast<Real>(1e-300));
  const Tensor& b = d.tensors[1].second;
  REQUIRE(b.shape() == Shape{2, 3});
  for (int i = 0; i < 6; ++i) REQUIRE(b[i] == Real(i * 0.25 - 0.5));
  REQUIRE(d.tensors[2].second.dim() == 0);
  REQUIRE(d.tensors[2].second.item() == Real(-1.75));
  REQUIRE(d.tensors[3].second.shape() == Shape{0, 3});
  REQUIRE(d.metadata.at("format") == "pt");
}

TEST_CASE("corrupt safetensors files give IoError naming the file and the problem", "[io]") {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  auto load_bytes = [&](const std::string& bytes) {
    write_file_atomic(path, bytes);
    return load_safetensors(path);
  };
  auto check = [&](const std::string& bytes, const std::string& problem) {
    INFO("expecting: " << problem);
    REQUIRE_THROWS_AS(load_bytes(bytes), IoError);
    REQUIRE_THROWS_WITH(load_bytes(bytes), Contains(path) && Contains(problem));
  };
  const std::string good_header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

  SECTION("missing file") {
    REQUIRE_THROWS_WITH(load_safetensors(dir.file("none.safetensors")),
                        Contains("none.safetensors") && Contains(std::strerror(ENOENT)));
  }
  SECTION("shorter than 8 bytes") { check("abc", "shorter than the 8-byte header length"); }
  SECTION("header length beyond the file") {
    std::string bytes = raw_file(good_header, 8);
    bytes[0] = static_cast<char>(200);
    check(bytes, "header length 200 goes beyond the end of the file");
  }
  SECTION("truncated data") {
    const std::string bytes = raw_file(good_header, 8);
    check(bytes.substr(0, bytes.size() - 3), "outside the data of 5 bytes");
  }
  SECTION("invalid JSON") { check(raw_file(R"({"a":{"dtype":)", 0), "header is not valid JSON"); }
  SECTION("header not an object") { check(raw_file("[1, 2]", 0), "header must be a JSON object"); }
  SECTION("unsupported dtype") {
    check(raw_file(R"({"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8), "unsupported dtype 'I64'");
  }
  SECTION("missing field") { check(raw_file(R"({"a":{"dtype":"F32","shape":[1]}})", 4), "has no \"data_offsets\""); }
  SECTION("negative offsets or dims") {
    check(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 4), "non-negative");
    check(raw_file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4), "non-negative");
  }
  SECTION("offsets outside the data") {
    check(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", 8), "lie outside the data");
  }
  SECTION("offsets reversed") {
    check(raw_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8), "end before they begin");
  }
  SECTION("offsets inconsistent with the shape") {
    check(raw_file(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,8]}})", 8), "needs 24");
    check(raw_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
          "more than the file holds");
  }
  SECTION("gap between tensors") {
    check(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                   R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", 12),
          "gap of 4 bytes before tensor 'b'");
  }
  SECTION("overlapping tensors") {
    check(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                   R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
          "overlaps");
  }
  SECTION("trailing bytes") { check(raw_file(good_header, 12), "4 bytes of data after the last tensor"); }
  SECTION("metadata that is not string to string") {
    check(raw_file(R"({"__metadata__":{"k":1}})", 0), "__metadata__ value of 'k' must be a string");
  }
}

TEST_CASE("encode_safetensors rejects repeated, empty and reserved names", "[io]") {
  const Tensor t({1});
  REQUIRE_THROWS_WITH(encode_safetensors({{"a", &t}, {"a", &t}}), Contains("'a'") && Contains("twice"));
  REQUIRE_THROWS_AS(encode_safetensors({{"", &t}}), ValueError);
  REQUIRE_THROWS_AS(encode_safetensors({{"__metadata__", &t}}), ValueError);
  REQUIRE_THROWS_AS(encode_safetensors({{"a", nullptr}}), ValueError);
}

TEST_CASE("CsvWriter writes a header and quoted, flushed rows", "[io]") {
  TempDir dir;
  const std::string path = dir.file("log.csv");
  CsvWriter csv(path, {"step", "loss", "note"});
  REQUIRE(read_file(path) == "step,loss,note\n");
  csv.row(std::vector<std::string>{"1", "2.5", "plain"});
  REQUIRE(read_file(path) == "step,loss,note\n1,2.5,plain\n");  // flushed at once
  csv.row(std::vector<std::string>{"2", "x", "a, \"b\""});
  csv.row(std::vector<double>{3, 0.1, 1e-7});
  REQUIRE(read_file(path) == "step,loss,note\n1,2.5,plain\n2,x,\"a, \"\"b\"\"\"\n3,0.1,1e-07\n");
  REQUIRE_THROWS_WITH(csv.row(std::vector<double>{1, 2}), Contains("2 values") && Contains("expected 3"));
  REQUIRE(CsvWriter::format_number(std::nan("")) == "nan");
  REQUIRE(CsvWriter::format_number(250) == "250");
  REQUIRE_THROWS_AS(CsvWriter(dir.file("nodir/x.csv"), {"a"}), IoError);
  REQUIRE_THROWS_AS((CsvWriter(dir.file("y.csv"), {"a", "a"})), ValueError);
}

TEST_CASE("CsvWriter::append continues a run's log only under the same header", "[io]") {
  TempDir dir;
  const std::string path = dir.file("log.csv");
  {
    CsvWriter csv = CsvWriter::append(path, {"step", "loss"});  // missing file: created
    csv.row(std::vector<double>{1, 0.5});
  }
  {
    CsvWriter csv = CsvWriter::append(path, {"step", "loss"});
    csv.row(std::vector<double>{2, 0.25});
  }
  REQUIRE(read_file(path) == "step,loss\n1,0.5\n2,0.25\n");
  REQUIRE_THROWS_WITH(CsvWriter::append(path, {"step", "acc"}),
                      Contains(path) && Contains("'step,loss'") && Contains("'step,acc'"));

  // A crash mid-row leaves a line without a newline: it is cut, not continued.
  write_file_atomic(path, "step,loss\n1,0.5\n2,0.2");
  {
    CsvWriter csv = CsvWriter::append(path, {"step", "loss"});
    csv.row(std::vector<double>{2, 0.25});
  }
  REQUIRE(read_file(path) == "step,loss\n1,0.5\n2,0.25\n");
}

TEST_CASE("CsvWriter::append widens an earlier attnlab's log to the columns added since", "[io][csv]") {
  TempDir dir;
  const std::string path = dir.file("metrics.csv");
  write_file_atomic(path, "step,loss,note\n1,0.5,\"a,b\"\n2,0.25,x\n3,0.1");  // the last row cut mid-write
  {
    CsvWriter csv = CsvWriter::append(path, {"step", "noise", "loss", "note", "more"});
    csv.row(std::vector<std::string>{"3", "7", "0.125", "y", "z"});
  }
  REQUIRE(read_file(path) == "step,noise,loss,note,more\n1,,0.5,\"a,b\",\n2,,0.25,x,\n3,7,0.125,y,z\n");
  // Columns in another order, or one that went away, are not an earlier attnlab's file: refused, untouched.
  write_file_atomic(path, "loss,step\n0.5,1\n");
  REQUIRE_THROWS_WITH(CsvWriter::append(path, {"step", "loss"}), Contains("'loss,step'"));
  write_file_atomic(path, "step,gone\n1,2\n");
  REQUIRE_THROWS_WITH(CsvWriter::append(path, {"step", "loss", "more"}), Contains("'step,gone'"));
  REQUIRE(read_file(path) == "step,gone\n1,2\n");
}

TEST_CASE("read_csv reads back what CsvWriter writes: commas, quotes, line breaks and CR LF in fields", "[io][csv]") {
  TempDir dir;
  const std::string path = dir.file("quoted.csv");
  const std::vector<std::string> columns = {"step", "a,b", "say \"hi\""};
  const std::vector<std::vector<std::string>> rows = {
      {"1", "plain", ""},
      {"2", "x, y", "\"quoted\""},
      {"3", "two\nlines", "cr\r\nlf"},
      {"4", "ends in cr\r", ","},
  };
  {
    CsvWriter csv(path, columns);
    for (const auto& row : rows) csv.row(row);
  }
  const CsvTable table = read_csv(path, 1 << 20);
  CHECK(table.columns == columns);
  CHECK(table.rows == rows);

  // Python's csv module ends lines in CR LF; a row cut mid-write (no line break, or inside quotes) is left out.
  write_file_atomic(path, "step,note\r\n1,\"a\r\nb\"\r\n2,\"c");
  const CsvTable python = read_csv(path, 1 << 20);
  CHECK(python.columns == std::vector<std::string>{"step", "note"});
  CHECK(python.rows == std::vector<std::vector<std::string>>{{"1", "a\r\nb"}});

  write_file_atomic(path, "step,note\n1,a\n2,b,c\n");
  CHECK_THROWS_WITH(read_csv(path, 1 << 20), path + " line 3 has 3 fields, its header 2");
  write_file_atomic(path, "step,note\n1,\"a\nb\"\n2,b,c\n");  // a record over two lines: the next starts on line 4
  CHECK_THROWS_WITH(read_csv(path, 1 << 20), path + " line 4 has 3 fields, its header 2");
  write_file_atomic(path, "\n1,2\n");
  CHECK_THROWS_WITH(read_csv(path, 1 << 20), path + " has no header line");
}

TEST_CASE("keep_csv_rows_through keeps the header and the complete rows up to a step, quoted line breaks and all",
          "[io][csv]") {
  TempDir dir;
  const std::string path = dir.file("log.csv");
  write_file_atomic(path, "step,note\n1,\"a\nb\"\n2,x\n3,\"c,d\"\n4,y\n5,cut mid-wr");
  keep_csv_rows_through(path, 3);
  CHECK(read_file(path) == "step,note\n1,\"a\nb\"\n2,x\n3,\"c,d\"\n");
  keep_csv_rows_through(path, 0);
  CHECK(read_file(path) == "step,note\n");
  keep_csv_rows_through(dir.file("missing.csv"), 3);  // nothing to keep, nothing created
  CHECK_FALSE(fs::exists(dir.file("missing.csv")));
}
