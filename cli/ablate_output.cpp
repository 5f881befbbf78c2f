// attnlab ablate's outputs: the JSON object, the table, the CSV file and
// the logits record (cli/ablate.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "cli/ablate.h"
#include "cli/effect_bar.h"

namespace attnlab::cli {

namespace {

constexpr int kBarWidth = 20;  // the effect bar of the largest effect

// NaN as null (a language model without an in-context split).
nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

nlohmann::json figures_of(const SetScore& s, bool lm) {
  nlohmann::json out = {
      {"loss", s.loss}, {"token_accuracy", s.token}, {"exact_match", lm ? nlohmann::json() : nlohmann::json(s.exact)}};
  if (lm) {
    out["in_context_loss"] = number_or_null(s.in_context_loss);
    out["late_token_accuracy"] = number_or_null(s.late_token);
  }
  return out;
}

nlohmann::json row_json(const AblationRow& row, const SetScore& intact, bool lm) {
  static const char* const kinds[] = {"head", "mlp", "layer"};
  nlohmann::json out = figures_of(row.score, lm);
  out["component"] = row.name();
  out["kind"] = row.components.size() == 1 ? kinds[static_cast<int>(row.components[0].kind)] : "group";
  out["delta_loss"] = row.score.loss - intact.loss;
  out["delta_token_accuracy"] = row.score.token - intact.token;
  out["delta_exact_match"] = lm ? nlohmann::json() : nlohmann::json(row.score.exact - intact.exact);
  if (lm) {
    out["delta_in_context_loss"] = number_or_null(row.score.in_context_loss - intact.in_context_loss);
    out["delta_late_token_accuracy"] = number_or_null(row.score.late_token - intact.late_token);
  }
  return out;
}

// A row's effect for its bar: the drop in exact match where some component lowers it, else
// (and for a language model) the rise in loss.
double effect(const nlohmann::json& row, bool by_exact) {
  return by_exact ? -row["delta_exact_match"].get<double>() : row["delta_loss"].get<double>();
}

std::string format(const char* pattern, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, pattern, v);
  return buf;
}

// One line: the name padded to `width`, then the cells (each right-aligned to 10).
std::string line(const std::string& name, size_t width, const std::vector<std::string>& cells) {
  std::string out = name + std::string(width > name.size() ? width - name.size() : 0, ' ');
  for (const std::string& c : cells) out += std::string(c.size() < 10 ? 10 - c.size() : 1, ' ') + c;
  return out;
}

// Whether the rows carry a language model's late-token accuracy (a window split in-context).
bool has_late(const nlohmann::json& figures) {
  return figures.contains("late_token_accuracy") && !figures["late_token_accuracy"].is_null();
}

std::vector<std::string> cells(const nlohmann::json& r, bool lm, bool deltas) {
  std::vector<std::string> out;
  if (!lm) out.push_back(format("%.2f%%", 100 * r["exact_match"].get<double>()));
  out.push_back(format("%.2f%%", 100 * r["token_accuracy"].get<double>()));
  if (has_late(r)) out.push_back(format("%.2f%%", 100 * r["late_token_accuracy"].get<double>()));
  out.push_back(format("%.4f", r["loss"].get<double>()));
  if (!deltas) return out;
  if (!lm) out.push_back(format("%+.2f", 100 * r["delta_exact_match"].get<double>()));
  out.push_back(format("%+.2f", 100 * r["delta_token_accuracy"].get<double>()));
  if (has_late(r)) out.push_back(format("%+.2f", 100 * r["delta_late_token_accuracy"].get<double>()));
  out.push_back(format("%+.4f", r["delta_loss"].get<double>()));
  return out;
}

}  // namespace

nlohmann::json ablation_json(const LoadedRun& loaded, const AblationResult& result, AblationMode mode, int64_t top) {
  const bool lm = loaded.task->language_model();
  nlohmann::json rows = nlohmann::json::array();
  for (const AblationRow& row : sort_by_effect(result, lm)) {
    if (top > 0 && static_cast<int64_t>(rows.size()) >= top) break;
    rows.push_back(row_json(row, result.intact, lm));
  }
  const std::string mode_text = choice_names(AblationMode{})[static_cast<size_t>(mode)].help;
  nlohmann::json out = {{"step", loaded.step},
          {"mode", name_of(mode)},
          {"mode_means", mode_text},
          {"examples", result.intact.sequences},
          {"tokens", result.intact.tokens},
          {"language_model", lm},
          {"components", result.rows.size()},
          {"metrics",
           {{"loss", "mean cross-entropy per answer token (nats), teacher-forced"},
            {"token_accuracy", "fraction of answer tokens that are the argmax given the right tokens before them"},
            {"exact_match", lm ? "none: a language model is scored per token"
                               : "fraction of examples whose every answer token is the argmax (greedy decoding's)"},
            {"delta", "ablated minus intact"},
            {"sorted_by", lm ? "rise in loss" : "drop in exact match, then rise in loss"}}},
          {"intact", figures_of(result.intact, lm)},
          {"rows", rows}};
  if (lm) {
    out["metrics"]["in_context_loss"] =
        "the late targets' mean loss less the early ones' (repeat: the repeat against the first copy; text: a window's "
        "halves)";
    out["metrics"]["late_token_accuracy"] = "token accuracy on the late targets";
  }
  return out;
}

void print_ablation_table(const nlohmann::json& f, std::ostream& out) {
  const bool lm = f["language_model"].get<bool>();
  size_t width = 12;
  for (const auto& r : f["rows"]) width = std::max(width, r["component"].get<std::string>().size() + 2);
  out << "ablation of " << f["run"].get<std::string>() << " (step " << f["step"] << "), mode " << f["mode"].get<std::string>()
      << ": " << f["examples"] << (lm ? " held-out windows (" + f["tokens"].dump() + " tokens)" : std::string(" held-out examples"))
      << ", " << f["rows"].size() << " of " << f["components"] << " components\n";
  bool by_exact = false;
  for (const auto& r : f["rows"]) by_exact = by_exact || (!lm && r["delta_exact_match"].get<double>() < 0);
  std::vector<std::string> head = {"token", "loss", "d.token", "d.loss"};
  if (!lm) head.insert(head.begin(), "exact"), head.insert(head.begin() + 3, "d.exact");
  if (has_late(f["intact"])) head = {"token", "late", "loss", "d.token", "d.late", "d.loss"};
  out << line("component", width, head) << "  effect (" << (by_exact ? "drop in exact match" : "rise in loss") << ")\n"
      << line("intact", width, cells(f["intact"], lm, false)) << "\n";
  double largest = 0;
  for (const auto& r : f["rows"]) largest = std::max(largest, effect(r, by_exact));
  for (const auto& r : f["rows"]) {
    const double e = effect(r, by_exact);
    const int bar = effect_bar(e, largest, kBarWidth);
    out << line(r["component"].get<std::string>(), width, cells(r, lm, true)) << (bar ? "  " + std::string(bar, '#') : "")
        << "\n";
  }
}

std::string ablation_csv(const nlohmann::json& f) {
  std::string out = "component,kind,exact_match,token_accuracy,loss,delta_exact_match,delta_token_accuracy,delta_loss\n";
  const auto number = [](const nlohmann::json& v) { return v.is_null() ? std::string() : v.dump(); };
  const auto add = [&](const std::string& name, const std::string& kind, const nlohmann::json& r) {
    out += name + "," + kind + "," + number(r["exact_match"]) + "," + number(r["token_accuracy"]) + "," + number(r["loss"]);
    if (r.contains("delta_loss"))
      out += "," + number(r["delta_exact_match"]) + "," + number(r["delta_token_accuracy"]) + "," + number(r["delta_loss"]);
    else out += ",,,";
    out += "\n";
  };
  add("intact", "intact", f["intact"]);
  for (const auto& r : f["rows"]) add(r["component"].get<std::string>(), r["kind"].get<std::string>(), r);
  return out;
}

AblationLogits AblationLogitsRecord::sink() {
  return [this](int64_t row, size_t batch, const Tensor& logits) {
    const size_t pass = static_cast<size_t>(row + 1);
    if (passes_.size() <= pass) passes_.resize(pass + 1);
    if (passes_[pass].size() <= batch) passes_[pass].resize(batch + 1);
    passes_[pass][batch] = logits;
  };
}

namespace {

template <class Values>
nlohmann::json flat(const Shape& shape, const Values& values) {
  return {{"shape", shape}, {"data", std::vector<double>(values.begin(), values.end())}};
}

}  // namespace

nlohmann::json AblationLogitsRecord::json(const TeacherForcedSet& set, const AblationResult& result, AblationMode mode,
                                          uint64_t seed) const {
  nlohmann::json batches = nlohmann::json::array(), passes = nlohmann::json::array();
  for (const FormattedBatch& b : set.batches) {
    nlohmann::json one;
    for (const auto& [key, ids, pad] : {std::tuple("src", &b.input.src, &b.input.src_pad),
                                         std::tuple("tgt_in", &b.input.tgt_in, &b.input.tgt_pad)})
      if (ids->numel()) {
        one[key] = flat(ids->shape, ids->data);
        one[std::string(key) == "src" ? "src_pad" : "tgt_pad"] = flat(pad->shape(), std::vector<Real>(pad->data(), pad->data() + pad->numel()));
      }
    batches.push_back(one);
  }
  for (size_t p = 0; p < passes_.size(); ++p) {
    nlohmann::json logits = nlohmann::json::array();
    for (const Tensor& t : passes_[p]) logits.push_back(flat(t.shape(), std::vector<Real>(t.data(), t.data() + t.numel())));
    passes.push_back({{"component", p ? result.rows[p - 1].name() : "intact"}, {"logits", logits}});
  }
  nlohmann::json out = {{"mode", name_of(mode)}, {"batches", batches}, {"passes", passes}};
  if (mode == AblationMode::resample) out["donors"] = resample_donors(set, seed);
  return out;
}

}  // namespace attnlab::cli
