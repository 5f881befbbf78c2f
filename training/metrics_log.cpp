#include "training/metrics_log.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "framework/error.h"
#include "framework/io/atomic_file.h"

namespace attnlab {

double weight_norm(const Module& model) {
  double sum = 0;
  for (const Var& p : model.parameters()) {
    const Tensor& w = p.value();
    for (int64_t i = 0; i < w.numel(); ++i) sum += static_cast<double>(w[i]) * static_cast<double>(w[i]);
  }
  return std::sqrt(sum);
}

const std::vector<std::string>& MetricsLog::columns() {
  static const std::vector<std::string> kColumns = {
      "step",          "loss",          "lr",           "grad_norm", "train_token_acc", "train_exact",
      "heldout_token_acc", "heldout_exact", "tokens_per_s", "elapsed_s", "heldout_loss",
      "noise_scale", "noise_trace", "noise_grad_sq", "weight_norm", "in_context_loss"};
  return kColumns;
}

MetricsLog::MetricsLog(const std::string& path, int64_t resume_step) {
  if (path.empty()) return;
  if (resume_step < 0) {
    csv_ = std::make_unique<CsvWriter>(path, columns());
    return;
  }
  keep_csv_rows_through(path, resume_step);  // only complete rows: a run killed mid-write leaves one unterminated
  csv_ = std::make_unique<CsvWriter>(CsvWriter::append(path, columns()));
}

void MetricsLog::start_interval() {
  start_ = std::chrono::steady_clock::now();
  excluded_s_ = 0;
}

void MetricsLog::add(const StepResult& step) {
  sum_loss_ += step.loss;
  sum_token_ += step.accuracy.token;
  sum_exact_ += step.accuracy.exact;
  sum_norm_ += step.grad_norm;
  ++steps_;
  tokens_ += step.tokens;
}

void MetricsLog::exclude(double seconds) { excluded_s_ += seconds; }

std::string MetricsLog::interval_state() const {
  char text[256];  // %a: hexadecimal floating point, read back bit for bit
  std::snprintf(text, sizeof text, "%lld %lld %a %a %a %a", static_cast<long long>(steps_),
                static_cast<long long>(tokens_), sum_loss_, sum_token_, sum_exact_, sum_norm_);
  return text;
}

void MetricsLog::set_interval_state(const std::string& text, const std::string& source) {
  long long steps = 0, tokens = 0;
  double loss = 0, token = 0, exact = 0, norm = 0;
  int end = 0;
  if (std::sscanf(text.c_str(), "%lld %lld %la %la %la %la%n", &steps, &tokens, &loss, &token, &exact, &norm, &end) != 6 ||
      static_cast<size_t>(end) != text.size() || steps < 0 || tokens < 0)
    throw IoError(source + ": malformed metrics_interval '" + shortened(text) + "' in its metadata");
  steps_ = steps;
  tokens_ = tokens;
  sum_loss_ = loss;
  sum_token_ = token;
  sum_exact_ = exact;
  sum_norm_ = norm;
}

ProgressStats MetricsLog::write_row(int64_t step, double lr, const HeldoutScore* heldout, double elapsed_s,
                                   const NoiseScaleEma* noise, double weight_norm) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() - excluded_s_;
  ProgressStats out;
  out.step = step;
  out.tokens_per_s = seconds > 0 ? static_cast<double>(tokens_) / seconds : 0;
  const double n = static_cast<double>(steps_);
  out.loss = sum_loss_ / n;
  out.token_acc = sum_token_ / n;
  out.exact_acc = sum_exact_ / n;
  auto number = CsvWriter::format_number;
  auto held = [&](double v) { return heldout && std::isfinite(v) ? number(v) : std::string(); };
  const bool noisy = noise && noise->steps() > 0;
  const std::vector<std::string> row = {
      std::to_string(step), number(out.loss), number(lr), number(sum_norm_ / n), number(out.token_acc),
      number(out.exact_acc), heldout ? number(heldout->accuracy.token) : "",
      heldout ? number(heldout->accuracy.exact) : "", number(std::round(out.tokens_per_s)),
      CsvWriter::format_fixed(elapsed_s, 3), held(heldout ? heldout->loss : 0),
      noisy ? number(noise->scale()) : "", noisy ? number(noise->trace()) : "", noisy ? number(noise->grad_sq()) : "",
      number(weight_norm), held(heldout ? heldout->lm.in_context_loss : 0)};
  if (csv_) csv_->row(row);
  if (events_) write_events(step, row);
  sum_loss_ = sum_token_ = sum_exact_ = sum_norm_ = 0;
  steps_ = tokens_ = 0;
  start_interval();
  return out;
}

// Empty cells (held-out columns between evaluations) are not values: no scalar.
void MetricsLog::write_events(int64_t step, const std::vector<std::string>& row) {
  for (size_t i = 1; i < row.size(); ++i)
    if (!row[i].empty()) events_->scalar(columns()[i], step, std::strtod(row[i].c_str(), nullptr));
}

}  // namespace attnlab
