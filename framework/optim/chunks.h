#pragma once
// Elementwise optimizer kernels run over a parameter in cache-sized chunks.
#include <algorithm>
#include <cstdint>

namespace attnlab {

// Elements per chunk: a chunk's parameter, gradient and state stay in L1/L2
// between the statements of an update, so memory is read and written once.
constexpr int64_t kOptimChunk = 2048;
// Chunks below which a parallel region (about 0.5 us even on one thread)
// costs more than it saves.
constexpr int64_t kOptimParallelMinChunks = 16;

// Calls f(begin, end) for consecutive chunks covering [0, n), in parallel only
// for large parameters. Each chunk touches only its own elements, so results
// do not depend on the number of threads.
template <class F>
void for_each_chunk(int64_t n, F&& f) {
  const int64_t chunks = (n + kOptimChunk - 1) / kOptimChunk;
  if (chunks < kOptimParallelMinChunks) {
    for (int64_t c = 0; c < chunks; ++c) f(c * kOptimChunk, std::min(n, (c + 1) * kOptimChunk));
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) f(c * kOptimChunk, std::min(n, (c + 1) * kOptimChunk));
}

}  // namespace attnlab
