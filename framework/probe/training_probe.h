#pragma once
// TrainingProbe: gradient-flow and attention instruments for a training loop,
// written as CSV rows into a run directory. It only reads the model: the
// weights after N probed steps are bitwise those of an unprobed run.
//
// Per probed step, in order:
//   before_forward()       observes each attention layer's pattern and the
//                          residual-stream points on the seam
//   (forward)
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
  // layer's pattern is its module path + ".pattern" there. `stream_points`:
  // the residual-stream points to record, each its hook name and its label in
  // probe_stream.csv ({"blocks.0.resid_post", "block0"}), rows in the order
  // the forward passes them. resume_step >= 0: append to existing files,
  // dropping rows of later steps.
  TrainingProbe(Module& model, HookTable& hooks, const std::string& dir,
                std::vector<std::pair<std::string, std::string>> stream_points, int64_t resume_step = -1);

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
  void observe(bool on);  // adds (or removes) the observers of patterns and stream points
  void write_events(int64_t step, const std::vector<ParameterStats>& params);

  std::vector<std::pair<std::string, MultiHeadAttention*>> attention_;
  HookTable& hooks_;
  std::vector<int64_t> hook_ids_;  // observer ids while a step is probed
  std::vector<Var> patterns_;      // per attention layer: (B, h, T_q, T_k) of the probed forward
  std::vector<std::pair<std::string, std::string>> stream_points_;  // (hook name, label)
  UpdateProbe updates_;
  std::vector<std::pair<size_t, Var>> stream_;  // (index in stream_points_, (B, T, d)) as the forward passed them
  std::vector<std::vector<HeadStats>> heads_;  // per attention layer
  struct StreamRms {
    std::string label;
    double activation, gradient;
  };
  std::vector<StreamRms> stream_rms_;  // per point the forward passed
  CsvWriter params_csv_, stream_csv_, heads_csv_;
  TfEventsWriter* events_ = nullptr;
  std::vector<std::pair<std::string, Var>> params_;
  std::vector<std::vector<double>> grads_;  // per parameter, kept for the histograms (only with events_)
};

}  // namespace attnlab
