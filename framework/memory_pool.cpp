#include "framework/memory_pool.h"

#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace attnlab::memory {
namespace {

constexpr std::size_t kAlignment = 64;
// Beyond this much cached memory, freed blocks go back to the system.
constexpr std::size_t kMaxCachedBytes = std::size_t(4) << 30;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kPooling = false;
#else
constexpr bool kPooling = true;
#endif

struct Pool {
  std::mutex mutex;
  std::unordered_map<std::size_t, std::vector<void*>> free_blocks;
  PoolStats stats;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: tensors may be freed during static destruction
  return *p;
}

std::size_t rounded(std::size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

void* allocate(std::size_t bytes) {
  bytes = rounded(bytes);
  if (kPooling) {
    Pool& p = pool();
    std::lock_guard<std::mutex> lock(p.mutex);
    auto it = p.free_blocks.find(bytes);
    if (it != p.free_blocks.end() && !it->second.empty()) {
      void* block = it->second.back();
      it->second.pop_back();
      p.stats.cached_bytes -= bytes;
      ++p.stats.reused;
      return block;
    }
    ++p.stats.fresh;
  }
  return ::operator new(bytes, std::align_val_t(kAlignment));
}

void release(void* block, std::size_t bytes) noexcept {
  if (!block) return;
  bytes = rounded(bytes);
  if (kPooling) {
    Pool& p = pool();
    std::lock_guard<std::mutex> lock(p.mutex);
    if (p.stats.cached_bytes + bytes <= kMaxCachedBytes) {
      try {
        p.free_blocks[bytes].push_back(block);
        p.stats.cached_bytes += bytes;
        return;
      } catch (...) {
        // No memory to remember the block: free it below.
      }
    }
  }
  ::operator delete(block, std::align_val_t(kAlignment));
}

PoolStats stats() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.stats;
}

void trim() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  for (auto& [bytes, blocks] : p.free_blocks)
    for (void* block : blocks) ::operator delete(block, std::align_val_t(kAlignment));
  p.free_blocks.clear();
  p.stats.cached_bytes = 0;
}

}  // namespace attnlab::memory
