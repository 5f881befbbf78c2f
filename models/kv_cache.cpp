#include "models/kv_cache.h"

#include "framework/ops/elementwise.h"

namespace attnlab {

DecoderCache make_decoder_cache(const std::vector<std::shared_ptr<DecoderBlock>>& blocks, int64_t slots,
                                int64_t capacity) {
  DecoderCache c;
  for (const auto& block : blocks) {
    const MultiHeadAttention& a = *block->self_attn;
    c.self.emplace_back(slots, capacity, a.n_heads() * a.d_k(), a.n_heads() * a.d_v());
  }
  return c;
}

Var decoder_block_step(DecoderBlock& block, Norm norm, const Var& x, KvCache& self, const KvCache* cross,
                       const std::vector<int64_t>& slots) {
  if (block.cross_attn && !cross)
    throw ValueError("decoder_block_step: a block with cross-attention needs the memory cache");
  // Mirrors DecoderBlock::forward, sublayer by sublayer.
  auto attend_self = [&](const Var& in) { return block.self_attn->forward_step(in, self, slots); };
  auto attend_memory = [&](const Var& in) { return block.cross_attn->forward_memory(in, *cross, slots); };
  auto feed = [&](const Var& in) { return block.ff->forward(in); };
  Var h = residual_sublayer(norm, block.self_norm(), x, attend_self);
  if (block.cross_attn) h = residual_sublayer(norm, block.cross_norm(), h, attend_memory);
  if (block.ff) h = residual_sublayer(norm, block.ff_norm(), h, feed);
  return h;
}

}  // namespace attnlab
