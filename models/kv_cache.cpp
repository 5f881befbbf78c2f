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

Var decoder_block_step(DecoderBlock& block, bool pre_norm, const Var& x, KvCache& self, const KvCache* cross,
                       const std::vector<int64_t>& slots) {
  if (block.cross_attn && !cross)
    throw ValueError("decoder_block_step: a block with cross-attention needs the memory cache");
  // Mirrors DecoderBlock::forward; the norm in front of the feed-forward is ln3 with cross-attention, else ln2.
  LayerNorm& ff_norm = block.cross_attn ? *block.ln3 : *block.ln2;
  auto attend_self = [&](const Var& in) { return block.self_attn->forward_step(in, self, slots); };
  auto attend_memory = [&](const Var& in) { return block.cross_attn->forward_memory(in, *cross, slots); };
  Var h;
  if (pre_norm) {
    h = x + attend_self(block.ln1->forward(x));
    if (block.cross_attn) h = h + attend_memory(block.ln2->forward(h));
    return h + block.ff->forward(ff_norm.forward(h));
  }
  h = block.ln1->forward(x + attend_self(x));
  if (block.cross_attn) h = block.ln2->forward(h + attend_memory(h));
  return ff_norm.forward(h + block.ff->forward(h));
}

}  // namespace attnlab
