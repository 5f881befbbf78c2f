#pragma once
// What the benchmarks say about the CPU they ran on, read from /proc/cpuinfo:
// every JSON line of `attnlab bench` carries it, so a figure can be tied to
// the CPU kind it came from (docs/performance.md compares several).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace attnlab::bench {

struct CpuInfo {
  std::string model_name = "unknown";  // "model name", e.g. "AMD EPYC"
  std::string vendor = "unknown";      // "vendor_id", e.g. "AuthenticAMD"
  int family = -1;                     // "cpu family" (26: AMD Zen 5; 6: Intel's cores), -1 if absent
  int model = -1;                      // "model": the number within the family
  std::vector<std::string> isa;        // of kIsaFlags, those the CPU reports, in that order
};

// The instruction-set flags a figure depends on: the vector width, FMA, and
// the bf16 instructions `--precision bf16` needs (AVX512_BF16 or AMX).
extern const std::vector<std::string> kIsaFlags;

// The first processor's entry of a /proc/cpuinfo text.
CpuInfo parse_cpuinfo(const std::string& text);
// This machine's (parse_cpuinfo of /proc/cpuinfo; the defaults where it cannot be read).
CpuInfo cpu_info();
// This machine's model name, or "unknown".
std::string cpu_model();
// {"cpu", "cpu_vendor", "cpu_family", "cpu_model_number", "cpu_isa"} of this machine.
nlohmann::json cpu_json();

}  // namespace attnlab::bench
