#include "framework/probe/training_probe.h"

#include <filesystem>
#include <sstream>

#include "framework/io/atomic_file.h"

namespace attnlab {

namespace {

// A resumed run redoes the steps after its checkpoint: keep only earlier rows.
CsvWriter open_csv(const std::string& path, const std::vector<std::string>& columns, int64_t resume_step) {
  if (resume_step < 0) return CsvWriter(path, columns);
  keep_csv_rows_through(path, resume_step);
  return CsvWriter::append(path, columns);
}

std::string num(double v) { return CsvWriter::format_number(v); }

}  // namespace

const std::vector<std::string>& TrainingProbe::param_columns() {
  static const std::vector<std::string> c = {"step", "param", "grad_norm", "weight_norm", "update_norm", "update_ratio"};
  return c;
}
const std::vector<std::string>& TrainingProbe::stream_columns() {
  static const std::vector<std::string> c = {"step", "index", "point", "act_rms", "grad_rms"};
  return c;
}
const std::vector<std::string>& TrainingProbe::head_columns() {
  static const std::vector<std::string> c = {"step",      "layer",      "head",     "entropy", "max_weight",
                                             "saturated", "logit_mean", "logit_var"};
  return c;
}

TrainingProbe::TrainingProbe(Module& model, HookTable& hooks, const std::string& dir,
                             std::vector<std::pair<std::string, std::string>> stream_points, int64_t resume_step)
    : attention_(find_attention_modules(model)),
      hooks_(hooks),
      stream_points_(std::move(stream_points)),
      updates_(model.named_parameters()),
      params_csv_(open_csv(dir + "/probe_params.csv", param_columns(), resume_step)),
      stream_csv_(open_csv(dir + "/probe_stream.csv", stream_columns(), resume_step)),
      heads_csv_(open_csv(dir + "/probe_heads.csv", head_columns(), resume_step)),
      params_(model.named_parameters()) {}

void TrainingProbe::observe(bool on) {
  for (int64_t id : hook_ids_) hooks_.remove(id);
  hook_ids_.clear();
  patterns_.assign(on ? attention_.size() : 0, Var());
  for (size_t i = 0; on && i < attention_.size(); ++i)
    hook_ids_.push_back(hooks_.observe(attention_[i].first + ".pattern",
                                       [this, i](const std::string&, const Var& w) { patterns_[i] = w; }));
  for (size_t i = 0; on && i < stream_points_.size(); ++i)
    hook_ids_.push_back(hooks_.observe(stream_points_[i].first,
                                       [this, i](const std::string&, const Var& h) { stream_.emplace_back(i, h); }));
}

void TrainingProbe::before_forward() {
  abandon();
  observe(true);
}

void TrainingProbe::after_forward(const Var& loss) {
  // The fused ops' q and k, matched to the layers by order; when they do not
  // line up one to one (attention dropout takes the composed path) the logit
  // statistics are left out rather than guessed.
  std::vector<AttentionInputs> inputs = recorded_attention_inputs(loss);
  const bool matched = inputs.size() == attention_.size();
  heads_.clear();
  for (size_t i = 0; i < attention_.size(); ++i) {
    const MultiHeadAttention& mha = *attention_[i].second;
    const AttentionInputs in = matched ? inputs[i] : AttentionInputs{};
    const Tensor none;  // a layer the forward did not run
    heads_.push_back(attention_head_stats(patterns_[i].defined() ? patterns_[i].value() : none, in, mha.scale()));
  }
  observe(false);
  for (auto& [point, v] : stream_) v.retain_grad();
}

void TrainingProbe::after_backward() {
  stream_rms_.clear();
  for (const auto& [point, v] : stream_)
    stream_rms_.push_back({stream_points_[point].second, rms(v.value()), v.has_grad() ? rms(v.grad()) : 0.0});
  stream_.clear();  // releases the kept activations and gradients
  grads_.clear();
  if (events_)  // copied now: clipping and the update come before after_step
    for (const auto& [name, var] : params_)
      grads_.emplace_back(var.has_grad() ? std::vector<double>(var.grad().data(), var.grad().data() + var.numel())
                                         : std::vector<double>());
  updates_.before_step();
}

void TrainingProbe::after_step(int64_t step) {
  if (!updates_.armed()) return;
  const std::string s = std::to_string(step);
  const std::vector<ParameterStats> params = updates_.after_step();
  for (const ParameterStats& p : params)
    params_csv_.row({s, p.name, num(p.grad_norm), num(p.weight_norm), num(p.update_norm), num(p.update_ratio)});
  for (size_t i = 0; i < stream_rms_.size(); ++i) {
    const StreamRms& r = stream_rms_[i];
    stream_csv_.row({s, std::to_string(i), r.label, num(r.activation), num(r.gradient)});
  }
  for (size_t l = 0; l < heads_.size(); ++l)
    for (const HeadStats& h : heads_[l])
      heads_csv_.row({s, attention_[l].first, std::to_string(h.head), num(h.entropy), num(h.max_weight),
                      num(h.saturated), num(h.logit_mean), num(h.logit_var)});
  if (events_) write_events(step, params);
  abandon();
}

void TrainingProbe::write_events(int64_t step, const std::vector<ParameterStats>& params) {
  for (size_t i = 0; i < params.size(); ++i) {
    events_->scalar("grad_norm/" + params[i].name, step, params[i].grad_norm);
    if (i < grads_.size() && !grads_[i].empty()) events_->histogram("gradients/" + params[i].name, step, grads_[i]);
  }
  for (size_t l = 0; l < heads_.size(); ++l)
    for (const HeadStats& h : heads_[l])
      events_->scalar("attention_entropy/" + attention_[l].first + "/head" + std::to_string(h.head), step, h.entropy);
}

void TrainingProbe::abandon() {
  observe(false);
  stream_.clear();
  heads_.clear();
  stream_rms_.clear();
  grads_.clear();
  updates_.disarm();
}

}  // namespace attnlab
