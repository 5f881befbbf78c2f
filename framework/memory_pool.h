#pragma once
// A cache of freed tensor buffers, keyed by size, one per thread.
//
// A training step allocates the same buffers every step. Returning them to
// the system (large blocks are unmapped) and taking them back costs page
// faults and zeroing on every step; keeping freed blocks for reuse makes a
// steady-state step allocate nothing from the system. A block goes to the
// cache of the thread that frees it and is taken again by that thread (its
// cache lines still in that core's cache); a thread's cache is freed when the
// thread ends. Blocks are 64-byte aligned. Under AddressSanitizer the cache is bypassed so that use-after-free
// stays detectable.
#include <cstddef>
#include <cstdint>

namespace attnlab::memory {

void* allocate(std::size_t bytes);
void release(void* block, std::size_t bytes) noexcept;

struct PoolStats {
  std::size_t cached_bytes = 0;  // held for reuse
  uint64_t reused = 0;           // allocations served from the cache
  uint64_t fresh = 0;            // allocations that went to the system
};
PoolStats stats();  // summed over every thread's cache (and the counts of ended threads')
void trim();        // give every thread's cached blocks back to the system

}  // namespace attnlab::memory
