// The bf16 products of gemm.h (precision bf16): operands rounded to bfloat16,
// sums and results in fp32. Natively on oneDNN's matmul primitive; emulated
// (rounded operands, then Eigen's fp32 product) as the tests' reference.
#include "framework/ops/gemm_bf16.h"

#include <omp.h>

#include <cstring>
#include <map>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "framework/memory_pool.h"

#ifdef ATTNLAB_USE_ONEDNN
#include <dnnl.hpp>
#endif

namespace attnlab {

namespace {

uint16_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN: quiet, kept
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even (an overflow carries into Inf)
  return static_cast<uint16_t>(u >> 16);
}

float bf16_value(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// The stored matrix of `o` (rows x cols, row stride ld) converted into `out`,
// contiguous (row stride cols), by `convert`; rows in parallel when large.
template <class T, class Convert>
const T* converted(const GemmOperand& o, std::vector<T>& out, Convert convert) {
  const size_t n = static_cast<size_t>(o.rows * o.cols);
  if (out.size() < n) out.resize(n);  // grows once to the largest operand, then reused
  T* dst = out.data();
  const bool parallel = o.rows > 1 && n >= (size_t{1} << 16) && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t i = 0; i < o.rows; ++i) {
    const Real* row = o.data + i * o.ld;
    T* to = dst + i * o.cols;
    for (int64_t j = 0; j < o.cols; ++j) to[j] = convert(static_cast<float>(row[j]));
  }
  return dst;
}

// o rounded to bf16, as floats in out (contiguous): from its bf16 copy where it
// has one (the fp32 matrix may be gone: ValueReads), else rounded here.
const Real* rounded_floats(const GemmOperand& o, std::vector<Real>& out) {
  if (!o.bf16) return converted(o, out, [](float x) { return static_cast<Real>(detail::round_to_bf16(x)); });
  const size_t n = static_cast<size_t>(o.rows * o.cols);
  if (out.size() < n) out.resize(n);
  for (int64_t i = 0; i < o.rows; ++i)
    for (int64_t j = 0; j < o.cols; ++j)
      out[static_cast<size_t>(i * o.cols + j)] = static_cast<Real>(bf16_value(o.bf16[i * o.bf16_stride() + j]));
  return out.data();
}

// The same operand over a contiguous copy.
GemmOperand contiguous(const GemmOperand& o, const Real* data) { return {data, o.rows, o.cols, o.cols, o.trans}; }

}  // namespace

float detail::round_to_bf16(float x) { return bf16_value(bf16_bits(x)); }

void detail::bf16_emulated_gemm(const GemmOutput& c, const GemmOperand& a, const GemmOperand& b, Real alpha,
                                bool accumulate) {
  thread_local std::vector<Real> a_buf, b_buf;
  const GemmOperand ra = contiguous(a, rounded_floats(a, a_buf)), rb = contiguous(b, rounded_floats(b, b_buf));
  eigen_gemm(c, ra, rb, alpha, accumulate);
}

#ifdef ATTNLAB_USE_ONEDNN
namespace {

using Dims = dnnl::memory::dims;
using Desc = dnnl::memory::desc;

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// One matmul primitive with its memory objects and scratchpad, made once per
// shape and thread: a call only points the memories at its data.
struct Matmul {
  dnnl::matmul prim;
  dnnl::memory src, wei, dst;
  std::vector<char> scratch;
  std::unordered_map<int, dnnl::memory> args;
};

// (m, n, k) of the block, strides of op(A), op(B) and C, alpha's bits, accumulate.
using MatmulKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, uint32_t, bool>;

dnnl::matmul::primitive_desc matmul_desc(const Desc& src, const Desc& wei, const Desc& dst,
                                         float alpha, bool accumulate) {
  dnnl::primitive_attr attr;
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, dst), attr, cpu_engine());
}

Matmul& cached_matmul(const MatmulKey& key) {
  thread_local std::map<MatmulKey, Matmul> cache;
  auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  const auto [m, n, k, a0, a1, b0, b1, ldc, alpha_bits, accumulate] = key;
  float alpha;
  std::memcpy(&alpha, &alpha_bits, sizeof alpha);
  const Desc src({m, k}, dnnl::memory::data_type::bf16, Dims{a0, a1});
  const Desc wei({k, n}, dnnl::memory::data_type::bf16, Dims{b0, b1});
  const Desc dst({m, n}, dnnl::memory::data_type::f32, Dims{ldc, 1});
  const auto pd = matmul_desc(src, wei, dst, alpha, accumulate);
  Matmul& mm = cache[key];
  mm.prim = dnnl::matmul(pd);
  mm.src = dnnl::memory(src, cpu_engine(), DNNL_MEMORY_NONE);
  mm.wei = dnnl::memory(wei, cpu_engine(), DNNL_MEMORY_NONE);
  mm.dst = dnnl::memory(dst, cpu_engine(), DNNL_MEMORY_NONE);
  mm.args = {{DNNL_ARG_SRC, mm.src}, {DNNL_ARG_WEIGHTS, mm.wei}, {DNNL_ARG_DST, mm.dst}};
  const size_t pad = pd.scratchpad_desc().get_size();
  if (pad > 0) {
    mm.scratch.resize(pad);
    mm.args.insert({DNNL_ARG_SCRATCHPAD, dnnl::memory(pd.scratchpad_desc(), cpu_engine(), mm.scratch.data())});
  }
  return mm;
}

void run_matmul(const MatmulKey& key, const uint16_t* a, const uint16_t* b, float* c) {
  Matmul& mm = cached_matmul(key);
  mm.src.set_data_handle(const_cast<uint16_t*>(a));
  mm.wei.set_data_handle(const_cast<uint16_t*>(b));
  mm.dst.set_data_handle(c);
  thread_local dnnl::stream stream(cpu_engine());
  mm.prim.execute(stream, mm.args);
  stream.wait();
}

// A reorder of a stored fp32 matrix (rows x cols, row stride ld) into bf16,
// contiguous in the same layout, made once per (rows, cols, ld) and thread:
// oneDNN's own conversion, vectorised (VCVTNEPS2BF16 where the CPU has it:
// round to nearest even like bf16_bits, denormals to zero, which the bf16
// products' dot products do to their inputs anyway). The products read
// transposed operands through strides, so nothing is transposed here.
struct Reorder {
  dnnl::reorder prim;
  dnnl::memory from, to;
};

using ReorderKey = std::tuple<int64_t, int64_t, int64_t>;

Reorder& cached_reorder(const GemmOperand& o) {
  thread_local std::map<ReorderKey, Reorder> cache;
  const ReorderKey key{o.rows, o.cols, o.ld};
  auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  const Desc from({o.rows, o.cols}, dnnl::memory::data_type::f32, Dims{o.ld, 1});
  const Desc to({o.rows, o.cols}, dnnl::memory::data_type::bf16, Dims{o.cols, 1});
  Reorder& r = cache[key];
  r.from = dnnl::memory(from, cpu_engine(), DNNL_MEMORY_NONE);
  r.to = dnnl::memory(to, cpu_engine(), DNNL_MEMORY_NONE);
  r.prim = dnnl::reorder(r.from, r.to);
  return r;
}

// The stored matrix of o rounded to bf16 into out (rows x cols, contiguous).
void round_stored(const GemmOperand& o, uint16_t* out) {
  Reorder& r = cached_reorder(o);
  r.from.set_data_handle(const_cast<Real*>(o.data));
  r.to.set_data_handle(out);
  thread_local dnnl::stream stream(cpu_engine());
  r.prim.execute(stream, r.from, r.to);
  stream.wait();
}

// o's bf16 copy: the caller's (o.bf16), or o rounded into out, which grows
// once to the largest operand and is then reused.
const uint16_t* rounded(const GemmOperand& o, std::vector<uint16_t>& out) {
  if (o.bf16) return o.bf16;
  const size_t n = static_cast<size_t>(o.rows * o.cols);
  if (out.size() < n) out.resize(n);
  round_stored(o, out.data());
  return out.data();
}

}  // namespace

bool detail::onednn_bf16_native(std::string* kernel) {
  static const std::pair<bool, std::string> probe = [] {
    try {
      const Desc src({64, 64}, dnnl::memory::data_type::bf16, Dims{64, 1});
      const Desc dst({64, 64}, dnnl::memory::data_type::f32, Dims{64, 1});
      const std::string impl = matmul_desc(src, src, dst, 1.0f, false).impl_info_str();
      // Native: a kernel for the CPU's bf16 instructions (avx512_core_bf16, avx512_core_amx), not
      // an emulation on avx512_core or a reference loop.
      const bool native = impl.find("bf16") != std::string::npos || impl.find("amx") != std::string::npos;
      return std::make_pair(native, impl);
    } catch (const dnnl::error& e) {
      return std::make_pair(false, std::string("no bf16 matmul (") + e.what() + ")");
    }
  }();
  if (kernel) *kernel = probe.second;
  return probe.first;
}

// A and B are rounded whole in their stored layouts (or read from the caller's
// copies), then each block of C is one primitive call on its rows of op(A) or
// columns of op(B); a transposed operand is its copy read through strides.
void detail::onednn_bf16_gemm(const GemmOutput& c, const GemmOperand& a, const GemmOperand& b, Real alpha,
                              bool accumulate) {
  thread_local std::vector<uint16_t> a_buf, b_buf;
  const uint16_t* ab = rounded(a, a_buf);
  const uint16_t* bb = rounded(b, b_buf);
  const int64_t m = c.rows, n = c.cols, k = a.op_cols();
  // Strides of op(A) (m, k) and op(B) (k, n) in the copies of the stored matrices (the
  // caller's with their row strides, or the contiguous ones rounded here).
  const int64_t lda = a.bf16 ? a.bf16_stride() : a.cols, ldb = b.bf16 ? b.bf16_stride() : b.cols;
  const int64_t a0 = a.trans ? 1 : lda, a1 = a.trans ? lda : 1;
  const int64_t b0 = b.trans ? 1 : ldb, b1 = b.trans ? ldb : 1;
  uint32_t alpha_bits;
  const float alpha_f = static_cast<float>(alpha);
  std::memcpy(&alpha_bits, &alpha_f, sizeof alpha_bits);
  for_each_block(m, n, k, [&](int64_t lo, int64_t hi, bool by_rows) {
    if (by_rows)
      run_matmul({hi - lo, n, k, a0, a1, b0, b1, c.ld, alpha_bits, accumulate}, ab + lo * a0, bb, c.data + lo * c.ld);
    else
      run_matmul({m, hi - lo, k, a0, a1, b0, b1, c.ld, alpha_bits, accumulate}, ab, bb + lo * b1, c.data + lo);
  });
}
#endif

Bf16Copy::Bf16Copy(const GemmOperand& stored) : count_(static_cast<size_t>(stored.rows * stored.cols)) {
  if (count_ == 0) return;
  data_ = static_cast<uint16_t*>(memory::allocate(count_ * sizeof(uint16_t)));
#ifdef ATTNLAB_USE_ONEDNN
  if (detail::onednn_bf16_native(nullptr)) {
    round_stored(stored, data_);
    return;
  }
#endif
  // Emulated bf16 (the tests, where the CPU has none): its products round their own operands.
  for (int64_t i = 0; i < stored.rows; ++i)
    for (int64_t j = 0; j < stored.cols; ++j)
      data_[i * stored.cols + j] = bf16_bits(static_cast<float>(stored.data[i * stored.ld + j]));
}

Bf16Copy::~Bf16Copy() {
  if (data_) memory::release(data_, count_ * sizeof(uint16_t));
}

Bf16Copy::Bf16Copy(Bf16Copy&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}

Bf16Copy& Bf16Copy::operator=(Bf16Copy&& other) noexcept {
  if (this != &other) {
    if (data_) memory::release(data_, count_ * sizeof(uint16_t));
    data_ = std::exchange(other.data_, nullptr);
    count_ = std::exchange(other.count_, 0);
  }
  return *this;
}

}  // namespace attnlab
