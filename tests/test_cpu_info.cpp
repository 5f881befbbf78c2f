// bench/cpu_info.h: the first processor's model, family, model number and ISA
// flags out of a /proc/cpuinfo text, and what `attnlab bench` prints of them.
#include <catch2/catch.hpp>
#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/cpu_info.h"
#include "framework/ops/gemm.h"
#include "tests/cli_harness.h"

using attnlab::bench::CpuInfo;
using attnlab::bench::parse_cpuinfo;

namespace {

// Two logical processors of a made-up CPU; the second block differs, so
// reading past the first would show. The flags hold every ISA flag but in
// another order than kIsaFlags, with look-alikes that must not count.
const char* const kTwoProcessors =
    "processor\t: 0\n"
    "vendor_id\t: AuthenticAMD\n"
    "cpu family\t: 26\n"
    "model\t\t: 2\n"
    "model name\t: AMD EPYC 9B45\n"
    "flags\t\t: fpu amx_tile avx512_bf16 avx512fp16 avx512f fma avx2 avx512_vnni amx_bf16 avx\n"
    "\n"
    "processor\t: 1\n"
    "vendor_id\t: GenuineIntel\n"
    "cpu family\t: 6\n"
    "model\t\t: 143\n"
    "model name\t: Intel(R) Xeon(R) Platinum 8481C\n"
    "flags\t\t: fpu avx2\n";

// The JSON line `attnlab ARGS` printed; the test stops if it failed.
nlohmann::json bench_line(const std::string& args) {
  auto r = attnlab::testing::run_attnlab(args);
  INFO(args << "\n" << r.out);
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("parse_cpuinfo reads the first processor's vendor, family, model, name and ISA flags", "[bench]") {
  const CpuInfo c = parse_cpuinfo(kTwoProcessors);
  CHECK(c.vendor == "AuthenticAMD");
  CHECK(c.family == 26);
  CHECK(c.model == 2);  // "model", not the number in "model name"
  CHECK(c.model_name == "AMD EPYC 9B45");
  CHECK(c.isa == std::vector<std::string>{"avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"});
}

TEST_CASE("parse_cpuinfo keeps only the ISA flags the CPU reports and the defaults where a field is missing",
          "[bench]") {
  const CpuInfo c = parse_cpuinfo("processor\t: 0\nmodel name\t: Old CPU\nflags\t\t: sse2 avx2 avx512fx\n");
  CHECK(c.model_name == "Old CPU");
  CHECK(c.vendor == "unknown");
  CHECK(c.family == -1);
  CHECK(c.model == -1);
  CHECK(c.isa == std::vector<std::string>{"avx2"});  // avx512fx is not avx512f
  const CpuInfo none = parse_cpuinfo("");
  CHECK(none.model_name == "unknown");
  CHECK(none.isa.empty());
  CHECK(parse_cpuinfo("cpu family\t: twenty\n").family == -1);
}

TEST_CASE("every bench line names this CPU, the products' kernel and precision", "[bench][cli]") {
  const CpuInfo here = attnlab::bench::cpu_info();
  auto check_cpu = [&](const nlohmann::json& j) {
    CHECK(j["cpu"] == here.model_name);
    CHECK(j["cpu_vendor"] == here.vendor);
    CHECK(j["cpu_family"] == here.family);
    CHECK(j["cpu_model_number"] == here.model);
    CHECK(j["cpu_isa"] == nlohmann::json(here.isa));
  };
  const auto t = bench_line("bench --config graph --steps 2 --warmup 0 --no-peak");
  check_cpu(t);
  CHECK(t["precision"] == "fp32");
  CHECK(!t["gemm_kernel"].get<std::string>().empty());
  CHECK(t["gemm_backend"] == ATTNLAB_GEMM_BACKEND_NAME);
  CHECK(!t.contains("fma_peak_gflops"));  // --no-peak
  const auto d = bench_line("bench --decode --config S --batch 1 --no-reference");
  check_cpu(d);
  CHECK(d["precision"] == "fp32");
  CHECK(d["gemm_kernel"] == t["gemm_kernel"]);
}

TEST_CASE("bench measures the bf16 dot-product peak where the CPU has AVX512_BF16, and bf16 MFU against it",
          "[bench][cli][bf16]") {
  const auto& isa = attnlab::bench::cpu_info().isa;
  const bool has_bf16_dot = std::find(isa.begin(), isa.end(), "avx512_bf16") != isa.end();
  const std::string precision = attnlab::bf16_products_native() ? " --precision bf16" : "";
  const auto j = bench_line("bench --config graph --steps 2 --warmup 0" + precision);
  if (!has_bf16_dot) {
    CHECK(j["bf16_dot_peak_gflops"].is_null());
    CHECK(!j.contains("mfu_bf16"));
    return;
  }
  const double peak = j["bf16_dot_peak_gflops"].get<double>();
  CHECK(peak > 0);
  if (precision.empty()) return;
  CHECK(j["precision"] == "bf16");
  CHECK(j["mfu_bf16"].get<double>() == Approx(j["gflops"].get<double>() / peak));
}

TEST_CASE("bf16 products are native exactly where the CPU reports AVX512_BF16 or AMX-BF16 and they run on oneDNN",
          "[bench][bf16]") {
  const auto& isa = attnlab::bench::cpu_info().isa;
  const auto has = [&isa](const char* flag) { return std::find(isa.begin(), isa.end(), flag) != isa.end(); };
  const bool bf16_instructions = has("avx512_bf16") || has("amx_bf16");
  const bool onednn = std::string(attnlab::gemm_backend()) == "onednn";
  std::string why;
  const bool native = attnlab::bf16_products_native(&why);
  INFO("CPU bf16 instructions " << bf16_instructions << ", backend " << attnlab::gemm_backend() << ": " << why);
  CHECK(native == (bf16_instructions && onednn));
}
