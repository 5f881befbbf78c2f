#pragma once
// TrainingProbe: gradient-flow and attention instruments for a training loop,
// written as CSV rows into a run directory. It only reads the model: the
// weights after N probed steps are bitwise those of an unprobed run.
//
// Per probed step, in order:
//   before_forward()       observes each attention layer's pattern on the seam
//   (forward; the model appends its residual stream to stream_sink())
//   after_forward(loss)    attention statistics (reads q, k from the live graph);
//                          marks the residual-stream Vars to keep their gradients
//   (backward)
//   after_backward()       gradient norms, residual-stream gradients, weight snapshot
//   (clipping, optimizer step)
//   after_step(step)       update ratios; writes the rows
// abandon() drops a step that was skipped (e.g. a NaN gradient).
//
// Files (long format, one row per step and item):
//   probe_params.csv  step,param,grad_norm,weight_norm,update_norm,update_ratio
//   probe_stream.csv  step,index,point,act_rms,grad_rms
//   probe_heads.csv   step,layer,head,entropy,max_weight,saturated,logit_mean,logit_var
// With set_events(), the same step also goes to TensorBoard: scalars
// grad_norm/PARAM and attention_entropy/LAYER/headH, histograms gradients/PARAM
// (the gradient's values as backward left them, before clipping).
#include <memory>
#include <string>
#include <vector>

#include "framework/io/csv.h"
#include "framework/io/tfevents.h"
#include "framework/probe/attention_stats.h"
#include "framework/probe/gradient_stats.h"

namespace attnlab {

class TrainingProbe {
 public:
  // `hooks` is the model's seam (framework/nn/hook_points.h); each attention
  // layer's pattern is its module path + ".pattern" there. `stream_labels`
  // name the residual-stream points the model will append, in order ("emb",
  // "block0", ...); extra points are labelled by index. resume_step >= 0:
  // append to existing files, dropping rows of later steps.
  TrainingProbe(Module& model, HookTable& hooks, const std::string& dir, std::vector<std::string> stream_labels,
                int64_t resume_step = -1);

  std::vector<Var>* stream_sink() { return &stream_; }

  void before_forward();
  void after_forward(const Var& loss);
  void after_backward();
  void after_step(int64_t step);
  void abandon();

  // TensorBoard values of every probed step also go to `events` (null: none);
  // it must outlive the probe.
  void set_events(TfEventsWriter* events) { events_ = events; }

  static const std::vector<std::string>& param_columns();
  static const std::vector<std::string>& stream_columns();
  static const std::vector<std::string>& head_columns();

 private:
  void observe_patterns(bool on);
  void write_events(int64_t step, const std::vector<ParameterStats>& params);

  std::vector<std::pair<std::string, MultiHeadAttention*>> attention_;
  HookTable& hooks_;
  std::vector<int64_t> pattern_hooks_;  // observer ids while a step is probed
  std::vector<Var> patterns_;           // per attention layer: (B, h, T_q, T_k) of the probed forward
  std::vector<std::string> stream_labels_;
  UpdateProbe updates_;
  std::vector<Var> stream_;
  std::vector<std::vector<HeadStats>> heads_;  // per attention layer
  std::vector<std::pair<double, double>> stream_rms_;  // (activation, gradient) per point
  CsvWriter params_csv_, stream_csv_, heads_csv_;
  TfEventsWriter* events_ = nullptr;
  std::vector<std::pair<std::string, Var>> params_;
  std::vector<std::vector<double>> grads_;  // per parameter, kept for the histograms (only with events_)
};

}  // namespace attnlab
