#include "interventions/ablation.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "framework/error.h"
#include "framework/random.h"

namespace attnlab {

const ChoiceNames<AblationMode>& choice_names(AblationMode) {
  static const ChoiceNames<AblationMode> names = {
      {AblationMode::zero, "zero", "the component's output set to 0"},
      {AblationMode::mean, "mean", "its output replaced by its mean over the set at each position"},
      {AblationMode::resample, "resample", "its output taken from another example of the set, a seeded donor"}};
  return names;
}

namespace {

// Whether a point's positions are the source's (else the decoder input's).
bool on_source(const TransformerConfig& c, const std::string& point) {
  return c.arch == Arch::encoder || (c.arch == Arch::seq2seq && point.rfind("encoder.", 0) == 0);
}

// Whether position t of sequence b is padding in a (B, T) pad mask (none: no padding).
bool padded(const Tensor& pad, int64_t b, int64_t t, int64_t T) { return pad.numel() && pad[b * T + t] != 0; }

// A running mean per position of a (B, T, w) point: sums in double, in the order added.
struct MeanSums {
  std::vector<double> sum;     // (T_max, w)
  std::vector<int64_t> count;  // (T_max)
  int64_t width = 0;

  void add(const Tensor& x, const Tensor& pad) {
    const int64_t B = x.size(0), T = x.size(1), w = x.size(2);
    width = w;
    if (static_cast<int64_t>(count.size()) < T) {
      count.resize(static_cast<size_t>(T), 0);
      sum.resize(static_cast<size_t>(T * w), 0.0);
    }
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        if (padded(pad, b, t, T)) continue;
        const Real* row = x.data() + (b * T + t) * w;
        for (int64_t k = 0; k < w; ++k) sum[static_cast<size_t>(t * w + k)] += row[k];
        ++count[static_cast<size_t>(t)];
      }
  }
  Tensor mean() const {  // (T_max, w)
    const int64_t T = static_cast<int64_t>(count.size());
    Tensor out({T, width});
    for (int64_t t = 0; t < T; ++t)
      for (int64_t k = 0; k < width; ++k)
        if (count[static_cast<size_t>(t)])
          out[t * width + k] = static_cast<Real>(sum[static_cast<size_t>(t * width + k)] / count[static_cast<size_t>(t)]);
    return out;
  }
};

// What mean and resample put in, from the intact pass: per point the set's
// mean (T_max, w) and, for resample, each batch's value (B, T, w).
struct Sources {
  std::map<std::string, Tensor> mean;
  std::map<std::string, std::vector<Tensor>> value;
};

// Where a row's pass starts: the first block of its components' earliest stack (seq2seq:
// the encoder when one of them sits there).
struct Start {
  std::string stack;  // "", "encoder." or "decoder."
  int64_t block = 0;
  // Whether a forward from here reuses anything: not from block 0 of an encoder or decoder stack.
  bool reuses() const { return block > 0 || stack == "decoder."; }
  std::string resid_pre() const { return stack + "blocks." + std::to_string(block) + ".resid_pre"; }
};
const char* const kMemory = "encoder.ln_final";  // the encoder output a decoder start reads

Start start_of(const std::vector<Component>& group) {
  if (group.empty()) return {};
  const bool encoder = std::any_of(group.begin(), group.end(), [](const Component& k) { return k.stack == "encoder."; });
  Start s{encoder ? "encoder." : group[0].stack, -1};
  for (const Component& k : group)
    if (k.stack == s.stack && (s.block < 0 || k.block < s.block)) s.block = k.block;
  return s;
}

// Batch j's forward from `start` on, from what the intact pass kept (a copy: the pass
// may change its activations in place).
Var forward_from(SequenceModel& model, const TeacherForcedSet& set, size_t j, const Start& start, const Sources& kept) {
  const Var resid_pre(kept.value.at(start.resid_pre())[j]);  // (B, T, d)
  const Var memory = start.stack == "decoder." ? Var(kept.value.at(kMemory)[j]) : Var();  // (B, T_src, d)
  return model.forward_from(set.batches[j].input, start.stack, start.block, resid_pre, memory);
}

// One pass over the set with whatever hooks are set; `current` is the batch
// being run (the hooks read it). With `kept` (the intact pass's recorded
// values), from `start` on.
SetScore run_pass(SequenceModel& model, const TeacherForcedSet& set, size_t& current, int64_t row,
                  const AblationLogits& logits, const Start& start = {}, const Sources* kept = nullptr) {
  ScoreSums sums;
  const bool resume = kept && start.reuses();
  for (current = 0; current < set.batches.size(); ++current) {
    const Var out = resume ? forward_from(model, set, current, start, *kept) : model.forward(set.batches[current].input);
    if (logits) logits(row, current, out.value());
    sums.add(out.value(), set.batches[current].targets, batch_splits(set, current));
  }
  SetScore s = sums.score();
  if (set.format == BatchFormat::lm) s.exact = 0;
  return s;
}

// The intact pass, recording the mean of every point of `means` and each batch's value of
// every point of `kept` into `sources`.
SetScore intact_pass(SequenceModel& model, const TeacherForcedSet& set, const std::vector<std::string>& means,
                     const std::vector<std::string>& kept, Sources& sources, const AblationLogits& logits) {
  const TransformerConfig& c = model.config();
  std::map<std::string, MeanSums> sums;
  size_t current = 0;
  std::vector<std::string> points = means;
  for (const std::string& p : kept)
    if (std::find(points.begin(), points.end(), p) == points.end()) points.push_back(p);
  for (const std::string& point : points) {
    const bool mean = std::find(means.begin(), means.end(), point) != means.end();
    const bool keep = std::find(kept.begin(), kept.end(), point) != kept.end();
    model.hooks().observe(point, [&, mean, keep](const std::string& name, const Var& v) {
      const ModelInput& in = set.batches[current].input;
      if (mean) sums[name].add(v.value(), on_source(c, name) ? in.src_pad : in.tgt_pad);
      if (keep) sources.value[name].push_back(v.value());
    });
  }
  const SetScore s = run_pass(model, set, current, -1, logits);
  model.hooks().clear();
  for (const auto& [name, m] : sums) sources.mean[name] = m.mean();
  return s;
}

// Where example i sits: its batch and its row in it.
struct Place {
  size_t batch = 0;
  int64_t row = 0;
};

std::vector<Place> places(const TeacherForcedSet& set) {
  std::vector<Place> out(set.examples);
  for (size_t j = 0; j < set.batches.size(); ++j) {
    const size_t end = j + 1 < set.batches.size() ? set.first[j + 1] : set.examples;
    for (size_t i = set.first[j]; i < end; ++i) out[i] = {j, static_cast<int64_t>(i - set.first[j])};
  }
  return out;
}

// Everything a knock-out's replacement reads.
struct Knockout {
  const TransformerConfig& config;
  const TeacherForcedSet& set;
  AblationMode mode;
  const Sources& sources;
  const std::vector<size_t>& donors;
  const std::vector<Place>& where;
  const size_t& current;
};

// The column ranges a group changes on one point: disjoint, or one covering every column
// (width -1).
using ColumnRanges = std::vector<HeadColumns>;

// Copies each range of a full-width source row into x's row (b, t) (no source: zeros).
void put_row(Tensor& x, int64_t b, int64_t t, const Real* source, const ColumnRanges& ranges) {
  const int64_t T = x.size(1), w = x.size(2);
  Real* row = x.data() + (b * T + t) * w;
  for (const HeadColumns& cols : ranges) {
    const int64_t begin = cols.width < 0 ? 0 : cols.begin, width = cols.width < 0 ? w : cols.width;
    if (!source) std::fill(row + begin, row + begin + width, Real(0));
    else std::copy(source + begin, source + begin + width, row + begin);
  }
}

// The row resample puts at (b, t) of the current batch: the donor's, or the
// mean where the donor has no such position.
const Real* donor_row(const Knockout& k, const std::string& point, int64_t b, int64_t t) {
  const Place& d = k.where[k.donors[k.set.first[k.current] + static_cast<size_t>(b)]];
  const Tensor& value = k.sources.value.at(point)[d.batch];
  const ModelInput& in = k.set.batches[d.batch].input;
  const int64_t T = value.size(1), w = value.size(2);
  if (t < T && !padded(on_source(k.config, point) ? in.src_pad : in.tgt_pad, d.row, t, T))
    return value.data() + (d.row * T + t) * w;
  return k.sources.mean.at(point).data() + t * w;
}

// The replacement of `point`: the group's columns `ranges` changed in place, the rest
// untouched.
HookReplacer replacement(const Knockout& k, const std::string& point, const ColumnRanges& ranges) {
  return [&k, point, ranges](const std::string&, const Var& value) {
    Var out = value;  // under InferenceGuard nothing else reads this activation: change it in place
    Tensor& x = out.value();
    const int64_t B = x.size(0), T = x.size(1), w = x.size(2);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const Real* source = nullptr;
        if (k.mode == AblationMode::mean) source = k.sources.mean.at(point).data() + t * w;
        if (k.mode == AblationMode::resample) source = donor_row(k, point, b, t);
        put_row(x, b, t, source, ranges);
      }
    return out;
  };
}

// The points every group needs recorded (each once, in first-use order).
// The points a reusing pass starts from (each once): the starts' resid_pre, and the encoder
// output for a decoder start.
std::vector<std::string> start_points(const std::vector<std::vector<Component>>& groups) {
  std::vector<std::string> out;
  const auto add = [&out](const std::string& p) {
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  };
  for (const std::vector<Component>& group : groups) {
    const Start s = start_of(group);
    if (!s.reuses()) continue;
    add(s.resid_pre());
    if (s.stack == "decoder.") add(kMemory);
  }
  return out;
}

std::vector<std::string> needed_points(const TransformerConfig& c, const std::vector<std::vector<Component>>& groups) {
  std::vector<std::string> out;
  for (const std::vector<Component>& group : groups)
    for (const Component& k : group)
      for (const std::string& p : k.points(c))
        if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  return out;
}

// Per point, the union of the columns a group's components change there: a head its
// columns of z, an MLP or a layer every column of its points.
std::map<std::string, ColumnRanges> group_columns(const TransformerConfig& c, const std::vector<Component>& group) {
  std::map<std::string, ColumnRanges> out;
  for (const Component& k : group) {
    const HeadColumns cols = k.kind == ComponentKind::head ? head_columns(c, k.head) : HeadColumns{0, -1};
    for (const std::string& point : k.points(c)) {
      ColumnRanges& ranges = out[point];
      const auto same = [&](const HeadColumns& r) { return r.begin == cols.begin && r.width == cols.width; };
      if (cols.width < 0) ranges = {cols};
      else if ((ranges.empty() || ranges[0].width >= 0) && std::none_of(ranges.begin(), ranges.end(), same))
        ranges.push_back(cols);
    }
  }
  return out;
}

}  // namespace

std::vector<StreamLengths> stream_lengths(const TeacherForcedSet& set) {
  std::vector<StreamLengths> out(set.examples);
  const auto count = [](const IntTensor& ids, const Tensor& pad, int64_t b) {
    if (ids.shape.size() != 2) return int64_t(0);
    const int64_t T = ids.shape[1];
    int64_t n = 0;
    for (int64_t t = 0; t < T; ++t) n += !padded(pad, b, t, T);
    return n;
  };
  const std::vector<Place> where = places(set);
  for (size_t i = 0; i < set.examples; ++i) {
    const ModelInput& in = set.batches[where[i].batch].input;
    out[i] = {count(in.src, in.src_pad, where[i].row), count(in.tgt_in, in.tgt_pad, where[i].row)};
  }
  return out;
}

std::vector<size_t> resample_donors(const TeacherForcedSet& set, uint64_t seed) {
  const size_t n = set.examples;
  if (n < 2) throw ValueError("resample-ablation needs at least 2 examples to draw donors from, got " + std::to_string(n));
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  Rng rng(seed);
  for (size_t i = n - 1; i > 0; --i) std::swap(order[i], order[static_cast<size_t>(rng.integer(0, static_cast<int64_t>(i)))]);
  const std::vector<StreamLengths> lengths = stream_lengths(set);
  std::map<StreamLengths, std::vector<size_t>> groups;  // members in the seeded order
  for (size_t i : order) groups[lengths[i]].push_back(i);
  std::vector<size_t> donors(n);
  for (size_t k = 0; k < n; ++k) donors[order[k]] = order[(k + 1) % n];
  for (const auto& [key, members] : groups)
    if (members.size() > 1)
      for (size_t k = 0; k < members.size(); ++k) donors[members[k]] = members[(k + 1) % members.size()];
  return donors;
}

std::string AblationRow::name() const {
  std::string out;
  for (const Component& k : components) out += (out.empty() ? "" : " + ") + k.name();
  return out;
}

AblationResult ablate(SequenceModel& model, const TeacherForcedSet& set, const std::vector<Component>& components,
                      AblationMode mode, uint64_t seed, const AblationLogits& logits, bool reuse_prefix) {
  std::vector<std::vector<Component>> groups;
  for (const Component& k : components) groups.push_back({k});
  return ablate_groups(model, set, groups, mode, seed, logits, reuse_prefix);
}

AblationResult ablate_groups(SequenceModel& model, const TeacherForcedSet& set,
                             const std::vector<std::vector<Component>>& groups, AblationMode mode, uint64_t seed,
                             const AblationLogits& logits, bool reuse_prefix) {
  const TransformerConfig& c = model.config();
  InferenceGuard guard(model);
  model.hooks().clear();
  // The hooks read this call's locals: none may outlive it, whatever throws.
  struct ClearHooks {
    HookTable& table;
    ~ClearHooks() { table.clear(); }
  } clear_hooks{model.hooks()};
  const std::vector<size_t> donors = mode == AblationMode::resample ? resample_donors(set, seed) : std::vector<size_t>();
  Sources sources;
  AblationResult result;
  size_t current = 0;
  const std::vector<std::string> means = mode == AblationMode::zero ? std::vector<std::string>() : needed_points(c, groups);
  std::vector<std::string> kept = reuse_prefix ? start_points(groups) : std::vector<std::string>();
  if (mode == AblationMode::resample) kept.insert(kept.end(), means.begin(), means.end());
  result.intact = intact_pass(model, set, means, kept, sources, logits);
  const std::vector<Place> where = places(set);
  const Knockout knockout{c, set, mode, sources, donors, where, current};
  for (size_t r = 0; r < groups.size(); ++r) {
    for (const auto& [point, ranges] : group_columns(c, groups[r]))
      model.hooks().replace(point, replacement(knockout, point, ranges));
    const Start start = start_of(groups[r]);
    result.rows.push_back(
        {groups[r], run_pass(model, set, current, static_cast<int64_t>(r), logits, start, reuse_prefix ? &sources : nullptr)});
    model.hooks().clear();
  }
  return result;
}

}  // namespace attnlab
