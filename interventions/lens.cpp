#include "interventions/lens.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "framework/error.h"
#include "framework/nn/layer_norm.h"
#include "framework/ops/matmul.h"
#include "interventions/components.h"

namespace attnlab {

// Named, not anonymous: the unity build joins this file with others of the library.
namespace lens_impl {

// The stack whose stream the output head reads: "decoder." for seq2seq.
std::string output_stack(const TransformerConfig& c) { return c.arch == Arch::seq2seq ? "decoder." : ""; }

std::shared_ptr<Module> child(const Module& m, const std::string& name) {
  for (const auto& [n, c] : m.children())
    if (n == name) return c;
  return nullptr;
}

// The final norm ln_f of the output stack (null for post-LN and norm none, which have none).
const LayerNorm* final_norm(const SequenceModel& model) {
  std::shared_ptr<Module> owner = model.config().arch == Arch::seq2seq ? child(model, "decoder") : nullptr;
  std::shared_ptr<Module> ln = owner ? child(*owner, "ln_f") : child(model, "ln_f");
  return dynamic_cast<const LayerNorm*>(ln.get());
}

// The head as TokenHead::forward reads it: W (V, d) and b (V; undefined with no_bias).
struct Head {
  Var weight, bias;
};
Head output_head(const SequenceModel& model) {
  const TransformerConfig& c = model.config();
  return {model.parameter(c.tie_embeddings ? "tok_emb.weight" : "head.weight"),
          c.no_bias ? Var() : model.parameter("head.bias")};
}

// The points the lens decodes: the output stack's embed and resid_posts.
std::vector<std::string> decoded_points(const SequenceModel& model) {
  std::vector<std::string> out;
  const std::string stack = output_stack(model.config());
  for (const std::string& p : model.residual_stream_points())
    if (p.compare(0, stack.size(), stack) == 0) out.push_back(p);
  return out;
}

// The heads and MLPs of the output stack, in forward order.
std::vector<Component> stream_writers(const TransformerConfig& c) {
  std::vector<Component> out;
  for (const Component& k : model_components(c))
    if (k.stack == output_stack(c) && k.kind != ComponentKind::layer) out.push_back(k);
  return out;
}

// Every point the reading needs, recorded by one forward.
std::map<std::string, Tensor> capture(SequenceModel& model, const FormattedBatch& batch,
                                      const std::vector<std::string>& points) {
  std::map<std::string, Tensor> seen;
  std::vector<int64_t> ids;
  for (const std::string& p : points)
    ids.push_back(model.hooks().observe(p, [&seen](const std::string& n, const Var& v) { seen[n] = v.value(); }));
  InferenceGuard guard(model);
  try {
    model.forward(batch.input);
  } catch (...) {
    for (int64_t id : ids) model.hooks().remove(id);
    throw;
  }
  for (int64_t id : ids) model.hooks().remove(id);
  return seen;
}

// The lens's logits of one point's stream (B, T, d) -> (B, T, V), as the model
// computes its own from its last one.
Tensor decode(const SequenceModel& model, const Tensor& stream) {
  NoGradGuard no_grad;
  Var h(stream);
  if (const LayerNorm* ln = final_norm(model)) h = ln->forward(h);
  const Head head = output_head(model);
  return linear(h, head.weight, head.bias).value();
}

// A row of V logits read as the lens reports it, against the right token y (< 0: none).
LensCell read_row(const Real* row, int64_t V, int32_t y) {
  LensCell cell;
  cell.top = static_cast<int32_t>(std::max_element(row, row + V) - row);
  const double top = row[cell.top];
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v]) - top);
  cell.top_probability = 1 / sum;
  if (y >= 0) {
    cell.answer_probability = std::exp(static_cast<double>(row[y]) - top) / sum;
    cell.answer_rank = 1;
    for (int64_t v = 0; v < V; ++v) cell.answer_rank += row[v] > row[y] || (row[v] == row[y] && v < y);
  }
  return cell;
}

std::vector<LensCell> read_point(const Tensor& logits, const IntTensor& answers) {
  const int64_t V = logits.size(-1);
  std::vector<LensCell> cells;
  for (int64_t i = 0; i < answers.numel(); ++i) {
    const int32_t y = answers.data[static_cast<size_t>(i)];
    cells.push_back(read_row(logits.data() + i * V, V, y == kIgnoreTarget ? -1 : y));
  }
  return cells;
}

// The frozen-scale read-out of the answer y at one row: a write c into the
// stream contributes (u·c − mean(c)·Σu)/σ with u = W_y ⊙ γ; without a final
// norm (norm none) u·c with u = W_y (not centred, σ = 1).
struct Readout {
  std::vector<double> u;
  double sum_u = 0, inv_sigma = 1, constant = 0;
  bool centred = true;
  template <class T>
  double of(const T* c) const {
    double dot = 0, total = 0;
    for (size_t i = 0; i < u.size(); ++i) {
      dot += u[i] * c[i];
      total += c[i];
    }
    return (dot - (centred ? total / static_cast<double>(u.size()) * sum_u : 0)) * inv_sigma;
  }
};

// The read-out of y at the row x (d) of the final stream: σ as ln_f computes
// it, or with norm none the head's row alone.
Readout readout(const SequenceModel& model, const Real* x, int32_t y) {
  const Head head = output_head(model);
  const int64_t d = model.config().d_model;
  const Real* w = head.weight.value().data() + y * d;
  Readout r;
  r.constant = head.bias.defined() ? head.bias.value()[y] : 0;
  const LayerNorm* ln_f = final_norm(model);
  if (!ln_f) {
    r.centred = false;
    r.u.assign(w, w + d);
    return r;
  }
  const LayerNorm& ln = *ln_f;
  const Real* gamma = ln.weight.value().data();
  const Real* beta = ln.bias.value().data();
  double mean = 0, var = 0;
  for (int64_t i = 0; i < d; ++i) mean += x[i];
  mean /= static_cast<double>(d);
  for (int64_t i = 0; i < d; ++i) var += (x[i] - mean) * (x[i] - mean);
  r.inv_sigma = 1 / std::sqrt(var / static_cast<double>(d) + ln.eps());
  for (int64_t i = 0; i < d; ++i) {
    r.u.push_back(static_cast<double>(w[i]) * gamma[i]);
    r.sum_u += r.u.back();
    r.constant += static_cast<double>(w[i]) * beta[i];
  }
  return r;
}

// A head's write into the stream at one row (d): its z columns (of the row
// z, h·d_v) through its columns of out_proj; parameter-free attention writes
// its z itself.
std::vector<double> head_write(const SequenceModel& model, const Component& k, const Real* z) {
  const TransformerConfig& c = model.config();
  if (c.parameter_free_attention) return std::vector<double>(z, z + c.d_model);
  const HeadColumns cols = head_columns(c, k.head);
  const Tensor& wo = model.parameter(k.block_prefix() + k.attention + ".out_proj.weight").value();  // (d, h·d_v)
  const int64_t in = wo.size(1);
  std::vector<double> out(static_cast<size_t>(c.d_model), 0);
  for (int64_t i = 0; i < c.d_model; ++i)
    for (int64_t j = cols.begin; j < cols.begin + cols.width; ++j) out[static_cast<size_t>(i)] += double(wo[i * in + j]) * z[j];
  return out;
}

// The points attribution reads: the embedding, each attention's z, each MLP's out.
std::vector<std::string> written_points(const SequenceModel& model) {
  const TransformerConfig& c = model.config();
  std::vector<std::string> out = {output_stack(c) + "embed"};
  for (const Component& k : stream_writers(c))
    if (k.kind == ComponentKind::mlp || k.head == 0) out.push_back(k.points(c)[0]);
  return out;
}

// The parts of the answer's logit at row r (b·T + t) of the recorded points.
std::vector<LogitPart> parts_at(const SequenceModel& model, const std::map<std::string, Tensor>& seen,
                                const Readout& read, int64_t r) {
  const TransformerConfig& c = model.config();
  const int64_t d = c.d_model;
  std::vector<LogitPart> parts = {{output_stack(c) + "embed", read.of(seen.at(output_stack(c) + "embed").data() + r * d)}};
  for (const Component& k : stream_writers(c)) {
    const Tensor& value = seen.at(k.points(c)[0]);
    const int64_t width = value.size(-1);
    if (k.kind == ComponentKind::head) parts.push_back({k.name(), read.of(head_write(model, k, value.data() + r * width).data())});
    else parts.push_back({k.name(), read.of(value.data() + r * d)});
    const bool last_head = k.kind == ComponentKind::head && k.head == heads_per_attention(c) - 1;
    if (last_head && !c.parameter_free_attention && !c.no_bias) {
      const std::string bias = k.block_prefix() + k.attention + ".out_proj.bias";
      parts.push_back({bias, read.of(model.parameter(bias).value().data())});
    }
  }
  parts.push_back({"constant", read.constant});
  return parts;
}

std::vector<Attribution> attribute(const SequenceModel& model, const std::map<std::string, Tensor>& seen,
                                   const std::string& last, const Tensor& logits, const IntTensor& answers) {
  const int64_t d = model.config().d_model, T = answers.shape[1], V = logits.size(-1);
  std::vector<Attribution> out;
  for (int64_t r = 0; r < answers.numel(); ++r) {
    const int32_t y = answers.data[static_cast<size_t>(r)];
    if (y == kIgnoreTarget) continue;
    const Readout read = readout(model, seen.at(last).data() + r * d, y);
    out.push_back({r / T, r % T, y, logits[r * V + y], read.inv_sigma, parts_at(model, seen, read, r)});
  }
  return out;
}

}  // namespace lens_impl

LensReading read_lens(SequenceModel& model, const FormattedBatch& batch) {
  using namespace lens_impl;
  LensReading out;
  out.points = decoded_points(model);
  out.answers = batch.targets;
  // A post-LN block renormalises the stream; pre-LN and norm-free streams are sums of the parts.
  const bool attributable = model.config().norm != Norm::post;
  std::vector<std::string> observed = out.points;
  if (attributable)
    for (const std::string& p : written_points(model)) observed.push_back(p);
  std::sort(observed.begin(), observed.end());
  observed.erase(std::unique(observed.begin(), observed.end()), observed.end());
  const std::map<std::string, Tensor> seen = capture(model, batch, observed);
  const int64_t P = static_cast<int64_t>(out.points.size()), B = batch.targets.shape[0], T = batch.targets.shape[1];
  out.logits = Tensor({P, B, T, model.config().vocab_size});
  Tensor logits;  // (B, T, V) of each point in turn
  for (int64_t p = 0; p < P; ++p) {
    logits = decode(model, seen.at(out.points[static_cast<size_t>(p)]));
    std::copy(logits.data(), logits.data() + logits.numel(), out.logits.data() + p * logits.numel());
    out.cells.push_back(read_point(logits, out.answers));
  }
  const Tensor& pad = model.config().arch == Arch::encoder ? batch.input.src_pad : batch.input.tgt_pad;  // (B, T)
  for (int64_t b = 0; b < B; ++b) {
    int64_t n = T;
    while (n > 0 && pad.numel() > 0 && pad[b * T + n - 1] != 0) --n;
    out.lengths.push_back(n);
  }
  if (attributable) {
    out.attribution = attribute(model, seen, out.points.back(), logits, out.answers);
  } else {
    out.refused = "direct logit attribution needs a pre-LN or norm-free model: a post-LN block renormalises the "
                  "stream, so no sum of parts gives the logit";
  }
  return out;
}

FormattedBatch lens_batch(const TransformerConfig& config, bool language_model, const TokenPairs& pairs) {
  if (!language_model) return format_batch(batch_format(config, false), pairs);
  TokenPairs shifted;
  for (const auto& [text, unused] : pairs) {
    if (text.empty()) throw ValueError("the input text is empty");
    std::vector<int32_t> next(text.begin() + 1, text.end());
    next.push_back(text.back());  // a placeholder: the last character has no next one
    shifted.emplace_back(text, std::move(next));
  }
  FormattedBatch batch = format_batch(BatchFormat::lm, shifted);
  const int64_t T = batch.targets.shape[1];
  for (size_t b = 0; b < pairs.size(); ++b)
    batch.targets.data[b * static_cast<size_t>(T) + pairs[b].first.size() - 1] = kIgnoreTarget;
  return batch;
}

}  // namespace attnlab
