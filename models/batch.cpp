#include "models/batch.h"

#include <algorithm>

namespace attnlab {

namespace {

void check_tokens(const std::vector<int32_t>& seq, size_t row, const char* which) {
  for (int32_t t : seq)
    if (t < 0)
      throw ValueError(std::string("format_batch: pair ") + std::to_string(row) + " has a negative " + which +
                       " token id " + std::to_string(t));
}

// Right-pads `seqs` to `width` with pad tokens; pad = 1 on the padding.
void fill_rows(const std::vector<std::vector<int32_t>>& seqs, int64_t width, IntTensor& ids, Tensor& pad) {
  const int64_t b = static_cast<int64_t>(seqs.size());
  ids = IntTensor({b, width}, SpecialTokens::pad);
  pad = Tensor({b, width}, Real(1));
  for (int64_t i = 0; i < b; ++i) {
    const auto& s = seqs[static_cast<size_t>(i)];
    for (size_t t = 0; t < s.size(); ++t) {
      ids.data[static_cast<size_t>(i * width) + t] = s[t];
      pad[i * width + static_cast<int64_t>(t)] = 0;
    }
  }
}

int64_t longest(const std::vector<std::vector<int32_t>>& seqs) {
  size_t n = 0;
  for (const auto& s : seqs) n = std::max(n, s.size());
  return std::max<int64_t>(1, static_cast<int64_t>(n));
}

IntTensor pad_targets(const std::vector<std::vector<int32_t>>& rows, int64_t width) {
  IntTensor out({static_cast<int64_t>(rows.size()), width}, kIgnoreTarget);
  for (size_t i = 0; i < rows.size(); ++i)
    std::copy(rows[i].begin(), rows[i].end(), out.data.begin() + static_cast<int64_t>(i) * width);
  return out;
}

}  // namespace

void pad_sequences(const std::vector<std::vector<int32_t>>& seqs, IntTensor& ids, Tensor& pad) {
  fill_rows(seqs, longest(seqs), ids, pad);
}

const ChoiceNames<BatchFormat>& choice_names(BatchFormat) {
  static const ChoiceNames<BatchFormat> names = {{BatchFormat::encoder, "encoder"}, {BatchFormat::decoder, "decoder"},
                                                 {BatchFormat::seq2seq, "seq2seq"}, {BatchFormat::lm, "lm"},
                                                 {BatchFormat::bare, "bare"}};
  return names;
}

BatchFormat batch_format(const TransformerConfig& config, bool language_model) {
  if (language_model) return BatchFormat::lm;
  if (config.arch == Arch::encoder) return BatchFormat::encoder;
  if (config.arch == Arch::seq2seq) return BatchFormat::seq2seq;
  return config.layout == Layout::bare ? BatchFormat::bare : BatchFormat::decoder;
}

int64_t prompt_length(BatchFormat format, size_t input_tokens) {
  const auto n = static_cast<int64_t>(input_tokens);
  switch (format) {
    case BatchFormat::decoder: return n + 2;
    case BatchFormat::bare: return n;
    case BatchFormat::seq2seq: return 1;
    case BatchFormat::encoder:
    case BatchFormat::lm: return 0;
  }
  return 0;
}

bool answers_end_with_eos(BatchFormat format) { return format == BatchFormat::decoder || format == BatchFormat::seq2seq; }

namespace {

// The token rows of a batch before padding: what the model reads (seq2seq's
// encoder reads `sources`) and what it is trained to predict.
struct Rows {
  std::vector<std::vector<int32_t>> sources, inputs, targets;
};

// encoder and lm: each output is aligned with its input, no specials.
Rows aligned_rows(BatchFormat format, const TokenPairs& pairs) {
  Rows rows;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& [in, out] = pairs[i];
    if (format == BatchFormat::encoder && out.size() > in.size())
      throw ValueError("format_batch (encoder): pair " + std::to_string(i) + " has an output of length " +
                       std::to_string(out.size()) + " longer than its input of length " +
                       std::to_string(in.size()) + "; a tagger emits one token per input position");
    if (format == BatchFormat::lm && in.size() != out.size())
      throw ValueError("format_batch (lm): pair " + std::to_string(i) + " has " + std::to_string(in.size()) +
                       " input and " + std::to_string(out.size()) + " target tokens; expected the same number");
    rows.inputs.push_back(in);
    rows.targets.push_back(out);
  }
  return rows;
}

// bare: tokens = src tgt; input = tokens[:-1], target = tokens[1:] with the
// positions before the last src token not predicted.
Rows bare_rows(const TokenPairs& pairs) {
  Rows rows;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& [src, tgt] = pairs[i];
    if (src.empty() || tgt.empty())
      throw ValueError("format_batch (bare): pair " + std::to_string(i) + " has an empty " +
                       (src.empty() ? "input" : "output") +
                       "; the bare layout predicts the answer from the input's last token, without special tokens");
    std::vector<int32_t> in = src, target(src.size() - 1, kIgnoreTarget);
    in.insert(in.end(), tgt.begin(), tgt.end() - 1);
    target.insert(target.end(), tgt.begin(), tgt.end());
    rows.inputs.push_back(std::move(in));
    rows.targets.push_back(std::move(target));
  }
  return rows;
}

// decoder: tokens = [bos] src [sep] tgt [eos]; input = tokens[:-1], target =
// tokens[1:] (src and sep not predicted). seq2seq: src; [bos] tgt; tgt [eos].
Rows prompted_rows(BatchFormat format, const TokenPairs& pairs) {
  if (format == BatchFormat::bare) return bare_rows(pairs);
  Rows rows;
  for (const auto& [src, tgt] : pairs) {
    std::vector<int32_t> in{SpecialTokens::bos}, target;
    if (format == BatchFormat::decoder) {
      in.insert(in.end(), src.begin(), src.end());
      in.push_back(SpecialTokens::sep);
      target.assign(src.size() + 1, kIgnoreTarget);
    } else {
      rows.sources.push_back(src);
    }
    in.insert(in.end(), tgt.begin(), tgt.end());
    target.insert(target.end(), tgt.begin(), tgt.end());
    target.push_back(SpecialTokens::eos);
    rows.inputs.push_back(std::move(in));
    rows.targets.push_back(std::move(target));
  }
  return rows;
}

}  // namespace

FormattedBatch format_batch(BatchFormat format, const TokenPairs& pairs) {
  if (pairs.empty()) throw ValueError("format_batch: the batch is empty");
  for (size_t i = 0; i < pairs.size(); ++i) {
    check_tokens(pairs[i].first, i, "input");
    check_tokens(pairs[i].second, i, "output");
  }
  const bool aligned = format == BatchFormat::encoder || format == BatchFormat::lm;
  const Rows rows = aligned ? aligned_rows(format, pairs) : prompted_rows(format, pairs);
  FormattedBatch batch;
  if (format == BatchFormat::encoder) {
    pad_sequences(rows.inputs, batch.input.src, batch.input.src_pad);
    batch.targets = pad_targets(rows.targets, batch.input.src.shape[1]);
    return batch;
  }
  if (format == BatchFormat::seq2seq) pad_sequences(rows.sources, batch.input.src, batch.input.src_pad);
  pad_sequences(rows.inputs, batch.input.tgt_in, batch.input.tgt_pad);
  batch.targets = pad_targets(rows.targets, batch.input.tgt_in.shape[1]);
  return batch;
}

}  // namespace attnlab
