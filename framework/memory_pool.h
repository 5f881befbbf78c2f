#pragma once
// A cache of freed tensor buffers, keyed by size.
//
// A training step allocates the same buffers every step. Returning them to
// the system (large blocks are unmapped) and taking them back costs page
// faults and zeroing on every step; keeping freed blocks for reuse makes a
// steady-state step allocate nothing from the system. Blocks are 64-byte
// aligned. Under AddressSanitizer the cache is bypassed so that use-after-free
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
PoolStats stats();
void trim();  // give every cached block back to the system

}  // namespace attnlab::memory
