// Single-precision matrix products of attnlab's S/M/L training shapes on every
// candidate library, one thread, row-major operands as the engine stores them.
// Prints one Markdown row per shape: GFLOP/s of each library (best of 9
// rounds, the libraries taking turns in each, each turn >= ~20 ms of work);
// oneDNN twice: its sgemm (attnlab's fp32 products) and its matmul primitive.
// This is how the default backend of framework/ops/gemm.cpp was chosen
// (docs/performance.md holds the table).
//
// Build: CMakeLists.txt defines the target where BLIS, libxsmm and oneDNN are
// installed (Debian: libblis-dev, libxsmm-dev, libdnnl-dev; OpenBLAS is opened
// at run time from libopenblas0-pthread):
//   cmake --build build --target gemm_candidates
//   OPENBLAS_CORETYPE=SkylakeX OMP_NUM_THREADS=1 build/gemm_candidates [FILTER]
// OpenBLAS picks its kernels by CPU model and falls back to slow generic ones
// on a model it does not know; OPENBLAS_CORETYPE names the kernels to use.
#include <blis.h>
#include <dnnl.hpp>
#include <libxsmm.h>
#include <omp.h>

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <tuple>
#include <vector>

#include <dlfcn.h>

// BLIS exports cblas_sgemm too, so OpenBLAS is opened on its own and its symbols looked up there.
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                            int);
CblasSgemm openblas_sgemm = nullptr;

namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Map = Eigen::Map<RowMat>;
using CMap = Eigen::Map<const RowMat>;

// C (m, n) = op(A) op(B), row-major, lda/ldb/ldc the row strides of the stored matrices.
struct Gemm {
  int m, n, k;
  bool ta, tb;
  const char* what;
};

void eigen_gemm(const Gemm& g, const float* a, const float* b, float* c) {
  CMap A(a, g.ta ? g.k : g.m, g.ta ? g.m : g.k), B(b, g.tb ? g.n : g.k, g.tb ? g.k : g.n);
  Map C(c, g.m, g.n);
  if (!g.ta && !g.tb) C.noalias() = A * B;
  else if (!g.ta) C.noalias() = A * B.transpose();
  else if (!g.tb) C.noalias() = A.transpose() * B;
  else C.noalias() = A.transpose() * B.transpose();
}

int lda(const Gemm& g) { return g.ta ? g.m : g.k; }
int ldb(const Gemm& g) { return g.tb ? g.k : g.n; }

void openblas_gemm(const Gemm& g, const float* a, const float* b, float* c) {
  openblas_sgemm(101, g.ta ? 112 : 111, g.tb ? 112 : 111, g.m, g.n, g.k, 1.f, a, lda(g), b, ldb(g), 0.f, c, g.n);
}

void blis_gemm(const Gemm& g, const float* a, const float* b, float* c) {
  float one = 1, zero = 0;
  bli_sgemm(g.ta ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, g.tb ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, g.m, g.n, g.k, &one,
            const_cast<float*>(a), lda(g), 1, const_cast<float*>(b), ldb(g), 1, &zero, c, g.n, 1);
}

void onednn_gemm(const Gemm& g, const float* a, const float* b, float* c) {
  dnnl_sgemm(g.ta ? 'T' : 'N', g.tb ? 'T' : 'N', g.m, g.n, g.k, 1.f, a, lda(g), b, ldb(g), 0.f, c, g.n);
}

// oneDNN's matmul primitive (the interface of its bf16 products, framework/ops/gemm_bf16.cpp),
// made once per shape: transposed operands are read through their strides.
void onednn_matmul(const Gemm& g, const float* a, const float* b, float* c) {
  using Desc = dnnl::memory::desc;
  using Dims = dnnl::memory::dims;
  struct Made { dnnl::matmul prim; dnnl::memory a, b, c; };
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  static dnnl::stream stream(engine);
  static std::map<std::tuple<int, int, int, bool, bool>, Made> made;
  const auto [found, fresh] = made.try_emplace({g.m, g.n, g.k, g.ta, g.tb});
  Made& mm = found->second;
  if (fresh) {
    const auto f32 = dnnl::memory::data_type::f32;
    const Desc ad({g.m, g.k}, f32, g.ta ? Dims{1, g.m} : Dims{g.k, 1});
    const Desc bd({g.k, g.n}, f32, g.tb ? Dims{1, g.k} : Dims{g.n, 1});
    const Desc cd({g.m, g.n}, f32, Dims{g.n, 1});
    mm = {dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(ad, bd, cd), engine)),
          dnnl::memory(ad, engine, DNNL_MEMORY_NONE), dnnl::memory(bd, engine, DNNL_MEMORY_NONE),
          dnnl::memory(cd, engine, DNNL_MEMORY_NONE)};
  }
  mm.a.set_data_handle(const_cast<float*>(a));
  mm.b.set_data_handle(const_cast<float*>(b));
  mm.c.set_data_handle(c);
  mm.prim.execute(stream, {{DNNL_ARG_SRC, mm.a}, {DNNL_ARG_WEIGHTS, mm.b}, {DNNL_ARG_DST, mm.c}});
  stream.wait();
}

// out (cols, rows) = in (rows, cols) transposed, in 16 x 16 tiles.
void transpose(const float* in, int rows, int cols, float* out) {
  for (int r0 = 0; r0 < rows; r0 += 16)
    for (int c0 = 0; c0 < cols; c0 += 16)
      for (int r = r0; r < std::min(rows, r0 + 16); ++r)
        for (int c = c0; c < std::min(cols, c0 + 16); ++c) out[size_t(c) * rows + r] = in[size_t(r) * cols + c];
}

// libxsmm's JIT kernels are column-major and (in 1.17) NN: row-major C = A B is
// column-major Cᵀ = Bᵀ Aᵀ, so the kernel is called with (B, A). C is tiled into
// 64-column x 64-row blocks over the full k; transposed operands are first copied
// upright (a cost of 1/k-th of the product's work).
void xsmm_gemm(const Gemm& g, const float* a, const float* b, float* c) {
  static std::vector<float> at, bt;
  if (g.ta) {
    at.resize(size_t(g.m) * g.k);
    transpose(a, g.k, g.m, at.data());
    a = at.data();
  }
  if (g.tb) {
    bt.resize(size_t(g.k) * g.n);
    transpose(b, g.n, g.k, bt.data());
    b = bt.data();
  }
  const int NB = 64, MB = 64;
  const libxsmm_blasint ldA = g.n, ldB = g.k, ldC = g.n;  // col-major: (B: n x k, ld n), (A: k x m, ld k)
  const float alpha = 1, beta = 0;
  const int flags = LIBXSMM_GEMM_FLAG_BETA_0;
  for (int i0 = 0; i0 < g.m; i0 += MB) {
    const int mb = std::min(MB, g.m - i0);
    for (int j0 = 0; j0 < g.n; j0 += NB) {
      const int nb = std::min(NB, g.n - j0);
      libxsmm_smmfunction f = libxsmm_smmdispatch(nb, mb, g.k, &ldA, &ldB, &ldC, &alpha, &beta, &flags, nullptr);
      f(b + j0, a + size_t(i0) * g.k, c + size_t(i0) * g.n + j0);
    }
  }
}

using Kernel = std::function<void(const Gemm&, const float*, const float*, float*)>;

// Best GFLOP/s of each kernel on one shape. The kernels take turns within each
// of 9 rounds, so a burst of load on this shared machine hits all of them alike.
std::vector<double> gflops(const Gemm& g, const std::vector<Kernel>& kernels) {
  std::vector<float> a(size_t(g.m) * g.k), b(size_t(g.k) * g.n), c(size_t(g.m) * g.n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float((i * 7) % 13) * 0.1f - 0.6f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = float((i * 5) % 11) * 0.1f - 0.5f;
  const double flops = 2.0 * g.m * g.n * g.k;
  const int reps = std::max(1, int(2e9 / flops));  // ~20 ms at 100 GFLOP/s
  std::vector<double> best(kernels.size(), 0);
  for (const Kernel& f : kernels) f(g, a.data(), b.data(), c.data());  // warm-up (JIT, packing buffers)
  for (int round = 0; round < 9; ++round)
    for (size_t i = 0; i < kernels.size(); ++i) {
      auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < reps; ++r) kernels[i](g, a.data(), b.data(), c.data());
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best[i] = std::max(best[i], flops * reps / s / 1e9);
    }
  return best;
}

}  // namespace

// An argument keeps only the products whose description contains it ("head", "L ").
int main(int argc, char** argv) {
  omp_set_num_threads(1);
  void* ob = dlopen("/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!ob) return std::fprintf(stderr, "gemm_candidates: %s\n", dlerror()), 1;
  openblas_sgemm = reinterpret_cast<CblasSgemm>(dlsym(ob, "cblas_sgemm"));
  reinterpret_cast<void (*)(int)>(dlsym(ob, "openblas_set_num_threads"))(1);
  bli_thread_set_num_threads(1);
  libxsmm_init();
  // S: B*T 1024, d 64, d_ff 256; M: 2048, 128, 512; L: 2048, 256, 1024, T 64, d_k 32.
  const std::vector<Gemm> shapes = {
      {1024, 64, 64, false, true, "S x W^T (qkv, out)"},     {1024, 256, 64, false, true, "S x W1^T"},
      {1024, 64, 256, false, true, "S h W2^T"},              {1024, 64, 256, false, false, "S dX = G W1"},
      {256, 64, 1024, true, false, "S dW1 = G^T X"},         {2048, 128, 128, false, true, "M x W^T"},
      {2048, 512, 128, false, true, "M x W1^T"},             {2048, 128, 512, false, true, "M h W2^T"},
      {2048, 128, 512, false, false, "M dX = G W1"},         {512, 128, 2048, true, false, "M dW1 = G^T X"},
      {128, 128, 2048, true, false, "M dW = G^T X (d x d)"}, {2048, 256, 256, false, true, "L x W^T"},
      {2048, 1024, 256, false, true, "L x W1^T"},            {2048, 256, 1024, false, true, "L h W2^T"},
      {2048, 256, 1024, false, false, "L dX = G W1"},        {1024, 256, 2048, true, false, "L dW1 = G^T X"},
      {256, 256, 2048, true, false, "L dW = G^T X (d x d)"}, {2048, 768, 256, false, true, "L x Wqkv^T (3d)"},
      {64, 64, 32, false, true, "L head Q K^T"},             {64, 32, 64, false, false, "L head P V"},
      {64, 32, 64, true, false, "L head dV = P^T dO"},       {32, 32, 16, false, true, "M head Q K^T"},
      {32, 16, 32, false, false, "M head P V"},              {32, 16, 32, true, false, "M head dV = P^T dO"},
      {16, 16, 16, false, true, "S head Q K^T"},             {16, 16, 16, false, false, "S head P V"},
      {16, 16, 16, true, false, "S head dV = P^T dO"},
  };
  std::printf("| product (m x n x k) | Eigen | OpenBLAS | BLIS | oneDNN sgemm | oneDNN matmul | libxsmm (tiled JIT) |\n"
              "|---|---|---|---|---|---|---|\n");
  const std::vector<Kernel> kernels = {eigen_gemm, openblas_gemm, blis_gemm, onednn_gemm, onednn_matmul, xsmm_gemm};
  for (const Gemm& g : shapes) {
    if (argc > 1 && !std::strstr(g.what, argv[1])) continue;
    const std::vector<double> r = gflops(g, kernels);
    std::printf("| %s (%d x %d x %d%s%s) | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", g.what, g.m, g.n, g.k,
                g.ta ? ", A^T" : "", g.tb ? ", B^T" : "", r[0], r[1], r[2], r[3], r[4], r[5]);
    std::fflush(stdout);
  }
}
