// /proc/cpuinfo read once per call: "key<tabs>: value" lines, one block per
// logical processor; the first block describes the CPU (the machines measured
// have one CPU kind).
#include "bench/cpu_info.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>

namespace attnlab::bench {

const std::vector<std::string> kIsaFlags = {"avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"};

namespace {

// The value of a "key : value" line whose key is `key`; false if it is another key.
bool value_of(const std::string& line, const std::string& key, std::string& value) {
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return false;
  std::string k = line.substr(0, colon);
  k.erase(k.find_last_not_of(" \t") + 1);
  if (k != key) return false;
  const size_t start = line.find_first_not_of(" \t", colon + 1);
  value = start == std::string::npos ? "" : line.substr(start);
  return true;
}

int number_or(const std::string& s, int fallback) {
  try {
    return std::stoi(s);
  } catch (const std::exception&) {
    return fallback;
  }
}

}  // namespace

CpuInfo parse_cpuinfo(const std::string& text) {
  CpuInfo info;
  std::istringstream in(text);
  std::string value;
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t") == std::string::npos) break;  // the end of the first processor's block
    if (value_of(line, "model name", value)) info.model_name = value;
    if (value_of(line, "vendor_id", value)) info.vendor = value;
    if (value_of(line, "cpu family", value)) info.family = number_or(value, -1);
    if (value_of(line, "model", value)) info.model = number_or(value, -1);
    if (value_of(line, "flags", value)) {
      std::istringstream flags(value);
      std::vector<std::string> present{std::istream_iterator<std::string>(flags), {}};
      for (const std::string& f : kIsaFlags)
        if (std::find(present.begin(), present.end(), f) != present.end()) info.isa.push_back(f);
    }
  }
  return info;
}

CpuInfo cpu_info() {
  std::ifstream in("/proc/cpuinfo");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_cpuinfo(text.str());
}

std::string cpu_model() { return cpu_info().model_name; }

nlohmann::json cpu_json() {
  const CpuInfo c = cpu_info();
  return {{"cpu", c.model_name},
          {"cpu_vendor", c.vendor},
          {"cpu_family", c.family},
          {"cpu_model_number", c.model},
          {"cpu_isa", c.isa}};
}

}  // namespace attnlab::bench
