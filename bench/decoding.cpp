// The decoding benchmark (attnlab bench --decode). The model (untrained,
// seeded) decodes a fixed batch of random prompts greedily; eos is forbidden
// (its head bias is set to -1e9) so every sequence decodes the same number of
// tokens and the work is fixed: decoder: prompt [bos] src [sep] of T/2
// positions, then T/2 new tokens, which fills the positional table; seq2seq: a
// source of T/2, then T/2 new tokens. tokens_per_s counts generated tokens
// over the median wall time of one greedy call.
#include "bench/decoding.h"

#include <omp.h>

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench/cpu_info.h"
#include "bench/timing.h"
#include "framework/error.h"
#include "framework/ops/gemm.h"
#include "models/config.h"
#include "models/decoder_lm.h"
#include "models/encoder_decoder.h"

namespace attnlab::bench {

namespace {

using Sources = std::vector<std::vector<int32_t>>;

TransformerConfig decode_config(const DecodeOptions& o) {
  TransformerConfig c;
  c.arch = o.arch;  // checked before: decoder or seq2seq
  c.vocab_size = o.shape.V;
  c.max_len = o.shape.T;
  c.d_model = o.shape.d;
  c.n_heads = o.shape.h;
  c.n_layers = o.shape.L;
  c.d_ff = o.shape.d_ff;
  return c;
}

// Median seconds of `reps` calls of decode (after one untimed call); the answers of the last.
template <class Decode>
double median_seconds(int64_t reps, Decode decode, Sources& answers) {
  answers = decode();
  std::vector<double> s;
  for (int64_t r = 0; r < reps; ++r) {
    auto t = Clock::now();
    answers = decode();
    s.push_back(seconds_since(t));
  }
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

}  // namespace

bool run_decoding(const DecodeOptions& o) {
  if (o.arch == Arch::encoder) throw ValueError("--arch must be decoder or seq2seq for --decode, got 'encoder'");
  if (o.batch < 1 || o.batch > 100000)
    throw ValueError("--batch must be in [1, 100000], got " + std::to_string(o.batch));
  if (o.reps < 1) throw ValueError("--steps must be >= 1 for --decode, got " + std::to_string(o.reps));
  omp_set_num_threads(o.threads);
  auto model = make_model(decode_config(o), o.seed);
  for (auto& [name, p] : model->named_parameters())
    if (name == "head.bias") p.value()[SpecialTokens::eos] = -1e9f;

  const bool decoder = o.arch == Arch::decoder;
  const int64_t T = o.shape.T, src_len = decoder ? T / 2 - 2 : T / 2, new_tokens = T - T / 2;
  Rng rng(o.seed + 1);
  Sources sources(static_cast<size_t>(o.batch));
  for (auto& s : sources)
    for (int64_t t = 0; t < src_len; ++t) s.push_back(static_cast<int32_t>(rng.integer(4, o.shape.V - 1)));

  auto* dec = dynamic_cast<DecoderLM*>(model.get());
  auto* s2s = dynamic_cast<EncoderDecoder*>(model.get());
  auto decode = [&](bool cached) {
    if (dec) return cached ? dec->greedy_cached(sources, new_tokens) : dec->greedy_uncached(sources, new_tokens);
    return cached ? s2s->greedy_cached(sources, new_tokens) : s2s->greedy_uncached(sources, new_tokens);
  };
  Sources cached_answers, uncached_answers;
  const double cached_s = median_seconds(o.reps, [&] { return decode(true); }, cached_answers);
  int64_t generated = 0;
  for (const auto& a : cached_answers) generated += static_cast<int64_t>(a.size());

  nlohmann::json out = cpu_json();
  out.update({{"impl", "attnlab"},   {"mode", "decode"},        {"config", o.shape.name},
              {"arch", name_of(o.arch)},      {"threads", o.threads},    {"batch", o.batch},
              {"src_len", src_len},  {"new_tokens", new_tokens}, {"generated", generated},
              {"ms", cached_s * 1e3}, {"tokens_per_s", static_cast<double>(generated) / cached_s},
              {"precision", name_of(gemm_precision())}, {"gemm_kernel", gemm_kernel()}});
  out["peak_rss_mib"] = peak_rss_mib();  // the cached path's: the uncached reference below needs far more
  if (o.reference) {
    const double uncached_s = median_seconds(o.reps, [&] { return decode(false); }, uncached_answers);
    out["uncached_ms"] = uncached_s * 1e3;
    out["uncached_tokens_per_s"] = static_cast<double>(generated) / uncached_s;
    out["speedup"] = uncached_s / cached_s;
    out["answers_equal"] = cached_answers == uncached_answers;
  }
  std::cout << out.dump() << std::endl;
  return !o.reference || cached_answers == uncached_answers;
}

}  // namespace attnlab::bench
