#pragma once
// KV-cached decoding (SequenceModel::decode, models/decoding.cpp): the cache
// of a decoder stack and one position's step through a block. Each step feeds one position of every active
// sequence through the decoder blocks; the blocks' self-attention reads the
// keys and values of earlier positions from a cache instead of recomputing
// the prefix, and cross-attention reads keys and values of the encoder
// memory computed once.
#include <cstdint>
#include <memory>
#include <vector>

#include "models/blocks.h"

namespace attnlab {

// The caches of one decoder stack, one entry per block.
struct DecoderCache {
  std::vector<KvCache> self;   // grows by one position per step
  std::vector<KvCache> cross;  // the encoder memory's keys and values; empty without cross-attention
};

// Empty self-attention caches with `slots` sequences of up to `capacity` positions.
DecoderCache make_decoder_cache(const std::vector<std::shared_ptr<DecoderBlock>>& blocks, int64_t slots,
                                int64_t capacity);

// One position x (B, 1, d) of the sequences in `slots` through a block, as
// DecoderBlock::forward computes it in eval mode (dropout is the identity
// there, so it is left out): `norm` selects the arrangement (the block's
// config.norm). `cross` is the block's memory cache (required when the block
// has cross-attention).
Var decoder_block_step(DecoderBlock& block, Norm norm, const Var& x, KvCache& self, const KvCache* cross,
                       const std::vector<int64_t>& slots);

}  // namespace attnlab
