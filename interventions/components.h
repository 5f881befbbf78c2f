#pragma once
// The parts of a model an intervention knocks out, patches or credits: each
// attention head, each feed-forward (MLP) and each whole block ("layer"), named
// after the hook points that carry their output (docs/hooks.md):
//   blocks.1.attn.h2        head 2 of block 1's attention (its columns of blocks.1.attn.z)
//   blocks.1.mlp            block 1's feed-forward (blocks.1.mlp.out)
//   blocks.1                the whole block: every attention's out and its mlp.out
// seq2seq prefixes them with encoder. or decoder.; a decoder block's heads sit
// in self_attn. and cross_attn. (decoder.blocks.0.cross_attn.h1). An
// attention-only model (config.attention_only) has no MLPs.
#include <cstdint>
#include <string>
#include <vector>

#include "models/sequence_model.h"

namespace attnlab {

enum class ComponentKind { head, mlp, layer };

struct Component {
  ComponentKind kind = ComponentKind::head;
  std::string stack;      // "", "encoder." or "decoder."
  int64_t block = 0;      // the block's index in its stack
  std::string attention;  // a head's attention under its block: "attn", "self_attn" or "cross_attn"
  int64_t head = -1;      // a head's index in its attention

  std::string block_prefix() const;  // "decoder.blocks.0."
  std::string name() const;          // as above
  // The hook points whose values are the component's output, which a knock-out
  // replaces: a head its attention's z (only the head's columns change), an MLP
  // its mlp.out, a layer each attention's out and its mlp.out (if it has one).
  std::vector<std::string> points(const TransformerConfig& config) const;
};

// A head's columns in its attention's z (B, T, h·d_v): [begin, begin + width).
// Parameter-free attention has one head as wide as the model.
struct HeadColumns {
  int64_t begin = 0, width = 0;
};
HeadColumns head_columns(const TransformerConfig& config, int64_t head);
int64_t heads_per_attention(const TransformerConfig& config);

// Every component of the model in forward order: per block, each attention's
// heads, then the MLP (none attention-only), then the block itself (encoder
// stack first).
std::vector<Component> model_components(const TransformerConfig& config);
// The components named (each name as Component::name writes it); ValueError
// naming the first unknown name and what this model has, e.g. "no component
// named 'blocks.2.attn.h0' (this model has blocks 0-1, heads h0-h3 in attn, mlp)".
std::vector<Component> components_named(const TransformerConfig& config, const std::vector<std::string>& names);

}  // namespace attnlab
