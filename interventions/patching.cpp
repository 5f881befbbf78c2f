#include "interventions/patching.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "framework/error.h"
#include "interventions/components.h"

namespace attnlab {

namespace {

// The rows of the logits that predict answer tokens, in answer order (targets != -100).
std::vector<int64_t> answer_rows(const FormattedBatch& batch) {
  std::vector<int64_t> rows;
  for (int64_t t = 0; t < batch.targets.shape[1]; ++t)
    if (batch.targets.data[static_cast<size_t>(t)] != kIgnoreTarget) rows.push_back(t);
  return rows;
}

std::string length_text(size_t n) { return std::to_string(n) + (n == 1 ? " token" : " tokens"); }

}  // namespace

void check_patching_lengths(size_t clean, size_t corrupt) {
  if (clean != corrupt)
    throw ValueError("the clean and corrupted inputs differ in length (clean " + length_text(clean) + ", corrupt " +
                     length_text(corrupt) + "): patching copies activations position by position and needs equal lengths");
}

PatchingPair patching_pair(BatchFormat format, const Example& clean, const Example& corrupt) {
  check_patching_lengths(clean.input.size(), corrupt.input.size());
  PatchingPair pair{clean.input, corrupt.input, clean.output, {}};
  if (format == BatchFormat::lm) {
    // A language model answers one token, its next after the text (the last row).
    pair.answer = clean.input;
    if (clean.output.at(0) != corrupt.output.at(0))
      pair.answers.push_back({static_cast<int64_t>(clean.input.size()) - 1, 0, clean.output[0], corrupt.output[0]});
  } else {
    const std::vector<int64_t> rows = answer_rows(format_batch(format, {{clean.input, clean.output}}));
    const size_t n = std::min({rows.size(), clean.output.size(), corrupt.output.size()});
    for (size_t j = 0; j < n; ++j)
      if (clean.output[j] != corrupt.output[j]) pair.answers.push_back({rows[j], j, clean.output[j], corrupt.output[j]});
  }
  if (pair.answers.empty())
    throw ValueError("the clean and corrupted inputs have the same answer at every position: nothing to restore");
  return pair;
}

std::vector<std::string> patched_residual_points(const TransformerConfig& config, const std::string& stack) {
  std::vector<std::string> points;
  for (int64_t b = 0; b < config.n_layers; ++b) points.push_back(stack + "blocks." + std::to_string(b) + ".resid_pre");
  points.push_back(stack + "blocks." + std::to_string(config.n_layers - 1) + ".resid_post");
  return points;
}

std::vector<std::pair<std::string, int64_t>> stack_positions(const TransformerConfig& config, BatchFormat format,
                                                             const PatchingPair& pair) {
  const FormattedBatch batch = format_batch(format, {{pair.clean, pair.answer}});
  const int64_t t_src = batch.input.src.numel() ? batch.input.src.shape[1] : 0;
  const int64_t t_tgt = batch.input.tgt_in.numel() ? batch.input.tgt_in.shape[1] : 0;
  if (config.arch == Arch::seq2seq) return {{"encoder.", t_src}, {"decoder.", t_tgt}};
  return {{"", config.arch == Arch::encoder ? t_src : t_tgt}};
}

std::vector<Patch> residual_patches(const TransformerConfig& config, BatchFormat format, const PatchingPair& pair) {
  std::vector<Patch> out;
  for (const auto& [stack, length] : stack_positions(config, format, pair))
    for (const std::string& point : patched_residual_points(config, stack))
      for (int64_t t = 0; t < length; ++t) out.push_back({PatchKind::residual, point, stack, t, {{point, t, 0, 0}}});
  return out;
}

std::vector<Patch> head_patches(const TransformerConfig& config, BatchFormat format, const PatchingPair& pair,
                                bool per_position) {
  std::map<std::string, int64_t> length;
  for (const auto& [stack, n] : stack_positions(config, format, pair)) length[stack] = n;
  std::vector<Patch> out;
  for (const Component& c : model_components(config)) {
    if (c.kind != ComponentKind::head) continue;
    const std::string z = c.points(config).front();
    const HeadColumns cols = head_columns(config, c.head);
    if (!per_position) {
      out.push_back({PatchKind::head, c.name(), c.stack, -1, {{z, -1, cols.begin, cols.width}}});
      continue;
    }
    for (int64_t t = 0; t < length[c.stack]; ++t)
      out.push_back({PatchKind::head_position, c.name(), c.stack, t, {{z, t, cols.begin, cols.width}}});
  }
  return out;
}

namespace {

// A hook table's entries set by one step, removed when it ends (also by an exception).
struct OwnHooks {
  HookTable& table;
  std::vector<int64_t> ids;
  explicit OwnHooks(HookTable& t) : table(t) {}
  ~OwnHooks() {
    for (int64_t id : ids) table.remove(id);
  }
  OwnHooks(const OwnHooks&) = delete;
  OwnHooks& operator=(const OwnHooks&) = delete;
};

// Batch row b of logits (B, T, V), as (T, V).
Tensor logits_row(const Tensor& logits, int64_t b) {
  const int64_t T = logits.size(1), V = logits.size(2);
  const Real* first = logits.data() + b * T * V;
  return Tensor::from({T, V}, std::vector<Real>(first, first + T * V));
}

// Copies `region` of row `from` of the clean values (2N, T, X) into row `to` of `target` (B, T, X).
void copy_region(const Tensor& clean, int64_t from, Tensor& target, int64_t to, const PatchRegion& region) {
  const int64_t T = target.size(1), X = target.size(2);
  const int64_t width = region.width > 0 ? region.width : X;
  if (region.position >= T || region.begin < 0 || region.begin + width > X)
    throw ValueError("patch region of '" + region.point + "' (position " + std::to_string(region.position) +
                     ", columns " + std::to_string(region.begin) + "+" + std::to_string(width) +
                     ") lies outside its " + target.shape_str());
  const int64_t t0 = region.position < 0 ? 0 : region.position, t1 = region.position < 0 ? T : region.position + 1;
  for (int64_t t = t0; t < t1; ++t)
    std::copy_n(clean.data() + (from * T + t) * X + region.begin, width, target.data() + (to * T + t) * X + region.begin);
}

// ValueError unless every pair reads sequences of the first pair's lengths (the runs stack them unpadded).
void check_same_lengths(const std::vector<PatchingPair>& pairs) {
  if (pairs.empty()) throw ValueError("activation patching needs at least one clean and corrupted pair");
  for (const PatchingPair& p : pairs)
    if (p.clean.size() != pairs[0].clean.size() || p.answer.size() != pairs[0].answer.size())
      throw ValueError("patched pairs must share their input and answer lengths: " + std::to_string(p.clean.size()) +
                       " and " + std::to_string(p.answer.size()) + " against " + std::to_string(pairs[0].clean.size()) +
                       " and " + std::to_string(pairs[0].answer.size()));
}

// The clean (row 2i) and corrupted (row 2i + 1) runs of every pair in one
// batch: their LDs into `run`, and the clean values of every patched point.
std::map<std::string, Tensor> clean_and_corrupt(SequenceModel& model, BatchFormat format,
                                                const std::vector<PatchingPair>& pairs,
                                                const std::vector<Patch>& patches, bool keep, PatchingRun& run) {
  TokenPairs rows;
  for (const PatchingPair& p : pairs) {
    rows.emplace_back(p.clean, p.answer);
    rows.emplace_back(p.corrupt, p.answer);
  }
  std::map<std::string, Tensor> cache;
  {
    OwnHooks own(model.hooks());
    std::set<std::string> points;
    for (const Patch& patch : patches)
      for (const PatchRegion& r : patch.regions) points.insert(r.point);
    for (const std::string& point : points)
      own.ids.push_back(model.hooks().observe(point, [&cache](const std::string& n, const Var& v) { cache[n] = v.value(); }));
    const Tensor logits = model.forward(format_batch(format, rows).input).value();  // (2N, T, V)
    for (size_t i = 0; i < pairs.size(); ++i) {
      const auto b = static_cast<int64_t>(2 * i);
      for (const AnswerSlot& slot : pairs[i].answers)
        run.pairs[i].push_back({logit_difference(logits, b, slot), logit_difference(logits, b + 1, slot),
                                std::vector<double>(patches.size(), 0.0)});
      if (!keep) continue;
      run.clean_logits.push_back(logits_row(logits, b));
      run.corrupt_logits.push_back(logits_row(logits, b + 1));
    }
  }
  return cache;
}

// One patched run per row: job j = patch j / N on pair j % N.
struct RowEdit {
  int64_t row = 0, from = 0;
  const PatchRegion* region = nullptr;
};

// Jobs [first, end) as one forward: each row the corrupted input of its pair with its patch.
void patched_rows(SequenceModel& model, BatchFormat format, const std::vector<PatchingPair>& pairs,
                  const std::vector<Patch>& patches, const std::map<std::string, Tensor>& cache, int64_t first,
                  int64_t end, bool keep, PatchingRun& run) {
  const auto N = static_cast<int64_t>(pairs.size());
  TokenPairs rows;
  std::map<std::string, std::vector<RowEdit>> edits;  // per point
  for (int64_t j = first; j < end; ++j) {
    const PatchingPair& pair = pairs[static_cast<size_t>(j % N)];
    rows.emplace_back(pair.corrupt, pair.answer);
    for (const PatchRegion& r : patches[static_cast<size_t>(j / N)].regions) edits[r.point].push_back({j - first, 2 * (j % N), &r});
  }
  OwnHooks own(model.hooks());
  for (const auto& [point, list] : edits) {
    const Tensor& clean = cache.at(point);
    own.ids.push_back(model.hooks().replace(point, [&clean, &list](const std::string&, const Var& v) {
      Tensor t = v.value();
      for (const RowEdit& e : list) copy_region(clean, e.from, t, e.row, *e.region);
      return Var(std::move(t));
    }));
  }
  const Tensor logits = model.forward(format_batch(format, rows).input).value();  // (end - first, T, V)
  for (int64_t j = first; j < end; ++j) {
    const auto p = static_cast<size_t>(j / N), i = static_cast<size_t>(j % N);
    for (size_t s = 0; s < pairs[i].answers.size(); ++s)
      run.pairs[i][s].patched[p] = logit_difference(logits, j - first, pairs[i].answers[s]);
    if (keep) run.patched_logits[static_cast<size_t>(j)] = logits_row(logits, j - first);
  }
}

}  // namespace

PatchingRun run_patching(SequenceModel& model, BatchFormat format, const std::vector<PatchingPair>& pairs,
                         const std::vector<Patch>& patches, const PatchingOptions& options) {
  check_same_lengths(pairs);
  if (options.rows_per_forward < 1)
    throw ValueError("rows per forward must be >= 1, got " + std::to_string(options.rows_per_forward));
  InferenceGuard guard(model);
  PatchingRun run;
  run.pairs.resize(pairs.size());
  const std::map<std::string, Tensor> cache = clean_and_corrupt(model, format, pairs, patches, options.keep_logits, run);
  const auto jobs = static_cast<int64_t>(patches.size() * pairs.size());
  if (options.keep_logits) run.patched_logits.resize(static_cast<size_t>(jobs));
  for (int64_t first = 0; first < jobs; first += options.rows_per_forward)
    patched_rows(model, format, pairs, patches, cache, first, std::min(jobs, first + options.rows_per_forward),
                 options.keep_logits, run);
  return run;
}

double logit_difference(const Tensor& logits, int64_t b, const AnswerSlot& slot) {
  const int64_t T = logits.size(1), V = logits.size(2);
  const Real* row = logits.data() + (b * T + slot.row) * V;
  return static_cast<double>(row[slot.clean]) - static_cast<double>(row[slot.corrupt]);
}

double fraction_restored(double patched, double clean, double corrupt) {
  if (clean == corrupt) return std::numeric_limits<double>::quiet_NaN();
  return (patched - corrupt) / (clean - corrupt);
}

LdSums ld_sums(const PatchingRun& run, int64_t pair, int64_t slot) {
  LdSums sums;
  int64_t pairs = 0;
  for (size_t i = 0; i < run.pairs.size(); ++i) {
    if (pair >= 0 && static_cast<int64_t>(i) != pair) continue;
    ++pairs;
    for (size_t s = 0; s < run.pairs[i].size(); ++s) {
      if (slot >= 0 && static_cast<int64_t>(s) != slot) continue;
      const SlotLd& ld = run.pairs[i][s];
      sums.clean += ld.clean;
      sums.corrupt += ld.corrupt;
      if (sums.patched.empty()) sums.patched.assign(ld.patched.size(), 0.0);
      for (size_t p = 0; p < ld.patched.size(); ++p) sums.patched[p] += ld.patched[p];
    }
  }
  if (pairs == 0) throw ValueError("no pair " + std::to_string(pair) + " in the patching run");
  const double n = static_cast<double>(pairs);
  sums.clean /= n;
  sums.corrupt /= n;
  for (double& v : sums.patched) v /= n;
  return sums;
}

std::vector<double> fractions_restored(const LdSums& sums) {
  std::vector<double> out;
  for (double v : sums.patched) out.push_back(fraction_restored(v, sums.clean, sums.corrupt));
  return out;
}

}  // namespace attnlab
