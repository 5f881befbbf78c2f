#include "framework/memory_pool.h"

#include <algorithm>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace attnlab::memory {
namespace {

constexpr std::size_t kAlignment = 64;
// Beyond this much cached memory in a thread's pool, freed blocks go back to the system.
constexpr std::size_t kMaxCachedBytes = std::size_t(4) << 30;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kPooling = false;
#else
constexpr bool kPooling = true;
#endif

// One pool per thread: a block a thread frees is the next one it takes of
// that size, still in its own core's cache (with one pool shared, threads
// running batch slices took each other's just-freed blocks: 20% slower at S).
// The mutex is taken only by its thread, and by stats() and trim().
struct Pool {
  std::mutex mutex;
  std::unordered_map<std::size_t, std::vector<void*>> free_blocks;
  PoolStats stats;
};

// Every live thread's pool, and the counts of those whose thread has ended.
struct Registry {
  std::mutex mutex;
  std::vector<Pool*> pools;
  PoolStats ended;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: tensors may be freed during static destruction
  return *r;
}

void free_cached(Pool& p) {
  for (auto& [bytes, blocks] : p.free_blocks)
    for (void* block : blocks) ::operator delete(block, std::align_val_t(kAlignment));
  p.free_blocks.clear();
  p.stats.cached_bytes = 0;
}

// Trivially destructible, so still readable while a thread's other objects are
// destroyed: after the pool's owner has gone, blocks go straight to the system.
thread_local Pool* t_pool = nullptr;
thread_local bool t_pool_ended = false;

// Gives the thread's cached blocks back when the thread ends.
struct PoolOwner {
  ~PoolOwner() {
    Pool* p = t_pool;
    t_pool = nullptr;
    t_pool_ended = true;
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.pools.erase(std::find(r.pools.begin(), r.pools.end(), p));
    r.ended.reused += p->stats.reused;
    r.ended.fresh += p->stats.fresh;
    free_cached(*p);
    delete p;
  }
};

// This thread's pool; null once the thread is ending.
Pool* pool() {
  if (t_pool || t_pool_ended) return t_pool;
  thread_local PoolOwner owner;
  t_pool = new Pool;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.pools.push_back(t_pool);
  return t_pool;
}

std::size_t rounded(std::size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

void* allocate(std::size_t bytes) {
  bytes = rounded(bytes);
  Pool* pooled = kPooling ? pool() : nullptr;
  if (pooled) {
    Pool& p = *pooled;
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
  Pool* pooled = kPooling ? pool() : nullptr;
  if (pooled) {
    Pool& p = *pooled;
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
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  PoolStats total = r.ended;
  for (Pool* p : r.pools) {
    std::lock_guard<std::mutex> pool_lock(p->mutex);
    total.cached_bytes += p->stats.cached_bytes;
    total.reused += p->stats.reused;
    total.fresh += p->stats.fresh;
  }
  return total;
}

void trim() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (Pool* p : r.pools) {
    std::lock_guard<std::mutex> pool_lock(p->mutex);
    free_cached(*p);
  }
}

}  // namespace attnlab::memory
