#include "cli/lens_reading.h"

#include <algorithm>
#include <iostream>

namespace attnlab::cli {

namespace {

// A language model's text, cut to the latest characters of its training context.
std::vector<int32_t> lens_text(const LoadedRun& loaded, const std::string& text) {
  std::vector<int32_t> ids = loaded.task->from_text(text);  // ValueError naming an unknown character
  if (ids.empty()) throw ValueError("the input text is empty");
  const auto context = static_cast<size_t>(std::min<int64_t>(loaded.model->config().max_len, loaded.settings.task.seq_len));
  if (ids.size() > context) {
    std::cerr << "note: the input has " << ids.size() << " characters; this model reads at most " << context
              << " (its training context), so the lens reads the last " << context << "\n";
    ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(context));
  }
  return ids;
}

nlohmann::json token_names(const Task& task, const IntTensor& ids, int64_t b, int64_t n) {
  nlohmann::json out = nlohmann::json::array();
  const int64_t T = ids.shape[1];
  for (int64_t t = 0; t < n; ++t) out.push_back(task.token_text(ids.data[static_cast<size_t>(b * T + t)]));
  return out;
}

nlohmann::json row_ids(const IntTensor& ids, int64_t b) {
  if (ids.numel() == 0) return nullptr;
  const auto T = static_cast<size_t>(ids.shape[1]), first = static_cast<size_t>(b) * T;
  return std::vector<int32_t>(ids.data.begin() + first, ids.data.begin() + first + T);
}

nlohmann::json lens_cells(const Task& task, const LensReading& r, int64_t b) {
  const int64_t T = r.answers.shape[1];
  nlohmann::json points = nlohmann::json::array();
  for (const std::vector<LensCell>& cells : r.cells) {
    nlohmann::json row = nlohmann::json::array();
    for (int64_t t = 0; t < r.lengths[static_cast<size_t>(b)]; ++t) {
      const LensCell& c = cells[static_cast<size_t>(b * T + t)];
      const bool answered = c.answer_rank > 0;
      row.push_back({{"top", task.token_text(c.top)}, {"top_id", c.top}, {"p_top", c.top_probability},
                     {"p_answer", answered ? nlohmann::json(c.answer_probability) : nlohmann::json()},
                     {"rank", answered ? nlohmann::json(c.answer_rank) : nlohmann::json()}});
    }
    points.push_back(std::move(row));
  }
  return points;
}

nlohmann::json attribution_json(const Task& task, const LensReading& r, int64_t b) {
  if (!r.refused.empty()) return nullptr;
  nlohmann::json out = nlohmann::json::array();
  for (const Attribution& a : r.attribution) {
    if (a.example != b) continue;
    nlohmann::json parts = nlohmann::json::array();
    for (const LogitPart& p : a.parts) parts.push_back({{"component", p.component}, {"logit", p.logit}});
    out.push_back({{"position", a.position}, {"answer", task.token_text(a.answer)}, {"answer_id", a.answer},
                   {"logit", a.logit}, {"inverse_scale", a.inverse_scale}, {"parts", parts}});
  }
  return out;
}

}  // namespace

TokenPairs lens_pairs(const LoadedRun& loaded, const std::string& text) {
  if (loaded.task->language_model()) return {{lens_text(loaded, text), {}}};
  // The task's refusal of what it cannot answer comes first, so that it is the only line printed
  // (parse_input notes an input unlike training's); parse_input refuses the rest (empty, specials, too long).
  const std::vector<int32_t> ids = loaded.task->from_text(text);
  std::vector<int32_t> answer;
  if (!ids.empty() && std::none_of(ids.begin(), ids.end(), Vocab::is_special)) answer = loaded.task->solve(ids);
  std::vector<int32_t> input = parse_input(loaded, text);
  return {{std::move(input), std::move(answer)}};
}

nlohmann::json lens_example_json(const LoadedRun& loaded, const FormattedBatch& batch, const LensReading& r,
                                 int64_t b) {
  const Task& task = *loaded.task;
  const bool encoder = loaded.model->config().arch == Arch::encoder;
  const int64_t n = r.lengths[static_cast<size_t>(b)], T = r.answers.shape[1];
  nlohmann::json answers = nlohmann::json::array();
  for (int64_t t = 0; t < n; ++t) {
    const int32_t y = r.answers.data[static_cast<size_t>(b * T + t)];
    answers.push_back(y == kIgnoreTarget ? nlohmann::json() : nlohmann::json(task.token_text(y)));
  }
  nlohmann::json out = {
      {"points", r.points},
      {"tokens", token_names(task, encoder ? batch.input.src : batch.input.tgt_in, b, n)},
      {"answers", answers},
      {"lens", lens_cells(task, r, b)},
      {"attribution", attribution_json(task, r, b)},
      {"attribution_note", !r.refused.empty() ? r.refused
                           : loaded.model->config().norm == Norm::none
                               ? "each part through the head (the model has no norm): the parts sum to the logit"
                               : "each part through ln_f with its scale 1/sigma frozen at this input's value (its "
                                 "centering is linear): the parts sum to the logit"},
      {"ids", {{"src", row_ids(batch.input.src, b)}, {"tgt_in", row_ids(batch.input.tgt_in, b)},
               {"targets", row_ids(batch.targets, b)}}}};
  return out;
}

}  // namespace attnlab::cli
