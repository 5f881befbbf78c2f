#pragma once
// Small model and task configurations that several test files build from.
#include <cstdint>
#include <string>

#include "datasets/task.h"
#include "models/config.h"

namespace attnlab::testing {

// A model configuration from its sizes, in docs/benchmark.md's column order:
// V, T (max_len), d, h, layers, d_ff. Everything else keeps its default.
inline TransformerConfig model_config(const std::string& arch, int64_t vocab_size, int64_t max_len, int64_t d_model,
                                      int64_t n_heads, int64_t n_layers, int64_t d_ff) {
  TransformerConfig c;
  c.arch = parse_choice<Arch>("arch", arch);
  c.vocab_size = vocab_size;
  c.max_len = max_len;
  c.d_model = d_model;
  c.n_heads = n_heads;
  c.n_layers = n_layers;
  c.d_ff = d_ff;
  return c;
}

// A generated task's configuration: its name, symbols and input length range.
inline TaskConfig task_config(const std::string& name, int64_t vocab, int64_t min_len, int64_t max_len) {
  TaskConfig c;
  c.name = name;
  c.vocab = vocab;
  c.min_len = min_len;
  c.max_len = max_len;
  return c;
}

// "a b c<TAB>c b a" for every 3-letter word over {a..e}: 125 distinct
// input-output lines for the pairs task.
inline std::string reverse_word_pairs() {
  std::string s;
  for (char x = 'a'; x <= 'e'; ++x)
    for (char y = 'a'; y <= 'e'; ++y)
      for (char z = 'a'; z <= 'e'; ++z) s += std::string{x, ' ', y, ' ', z, '\t', z, ' ', y, ' ', x, '\n'};
  return s;
}

}  // namespace attnlab::testing
