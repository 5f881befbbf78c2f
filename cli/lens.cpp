// attnlab lens: the logit lens and direct logit attribution of one input
// (interventions/lens.h, docs/interventions.md).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "cli/command_line.h"
#include "cli/lens_reading.h"
#include "framework/io/safetensors.h"

namespace attnlab::cli {

namespace {

const char* const kLensUsage =
    "usage: attnlab lens --run DIR \"INPUT\" [--step N] [--json] [--top K] [--logits FILE]\n\n"
    "The logit lens: the residual stream after the embedding and after each block, decoded as the model decodes "
    "its last one (pre-LN: through ln_f and the head; post-LN and --norm none: the head), at every position: the top token and its "
    "probability, the right answer's probability and rank (1 = top). Decoders and seq2seq read the input "
    "teacher-forced on the right answer; a language model reads the text, each position answered by the next "
    "character. Then direct logit attribution: the right answer's logit at each answer position split into what "
    "the embedding, each head, each attention's out_proj bias and each MLP write into the stream, each through "
    "ln_f with its scale 1/sigma frozen at this input's value, plus the constant (ln_f's bias through the head, "
    "the head's bias; --norm none: through the head alone); pre-LN and norm-free models only.\n\n";
const char* const kLensExample = "\nexample:\n  attnlab lens --run runs/sort \"3 1 2\" --top 8\n";

struct LensArgs {
  RunInputArgs run;
  bool json = false;
  int64_t top = 0;
  std::string logits_path;
};

// A token as the tables show it: a space and a newline as visible glyphs.
std::string glyph(const std::string& token) {
  if (token == " ") return "\u2423";
  return token == "\n" ? "\u21b5" : token;
}

// The columns a text takes: its UTF-8 characters.
size_t columns(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// A cell's text: "TOKEN P" (top) or "P #RANK" (the right answer), probabilities with 2 decimals.
std::string top_text(const nlohmann::json& c) {
  char buf[32];
  std::snprintf(buf, sizeof buf, " %.2f", c["p_top"].get<double>());
  return glyph(c["top"]) + buf;
}
std::string answer_text(const nlohmann::json& c) {
  if (c["rank"].is_null()) return "-";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f #%lld", c["p_answer"].get<double>(), static_cast<long long>(c["rank"].get<int64_t>()));
  return buf;
}

std::string signed3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.3f", v);
  return buf;
}

std::string padded(const std::string& s, size_t width) {
  return s + std::string(width > columns(s) ? width - columns(s) : 0, ' ');
}

// Rows of cells under a header of columns, in blocks of columns that fit 100 characters.
void print_grid(const std::vector<std::string>& header, const std::vector<std::string>& row_names,
                const std::vector<std::vector<std::string>>& rows) {
  size_t first = 0, cell = 0;
  for (const auto& h : header) cell = std::max(cell, columns(h));
  for (const auto& r : rows)
    for (const auto& c : r) cell = std::max(cell, columns(c));
  for (const auto& n : row_names) first = std::max(first, columns(n));
  cell += 2;
  const size_t per_block = std::max<size_t>(1, (100 - std::min<size_t>(first + 2, 60)) / cell);
  for (size_t begin = 0; begin < header.size(); begin += per_block) {
    const size_t end = std::min(header.size(), begin + per_block);
    std::cout << padded("", first + 2);
    for (size_t j = begin; j < end; ++j) std::cout << padded(header[j], cell);
    std::cout << "\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      std::cout << padded(row_names[i], first + 2);
      for (size_t j = begin; j < end; ++j) std::cout << padded(rows[i][j], cell);
      std::cout << "\n";
    }
  }
}

void print_lens(const nlohmann::json& e) {
  std::vector<std::string> header, names = e["points"].get<std::vector<std::string>>();
  for (size_t t = 0; t < e["tokens"].size(); ++t)
    header.push_back(std::to_string(t) + ":" + glyph(e["tokens"][t]));
  std::vector<std::string> right = {};
  for (const auto& a : e["answers"]) right.push_back(a.is_null() ? "-" : glyph(a));
  std::vector<std::vector<std::string>> tops = {right}, answers = {right};
  for (const auto& point : e["lens"]) {
    tops.emplace_back();
    answers.emplace_back();
    for (const auto& c : point) {
      tops.back().push_back(top_text(c));
      answers.back().push_back(answer_text(c));
    }
  }
  names.insert(names.begin(), "right answer");
  std::cout << "the lens's top token and its probability, at each position (POSITION:TOKEN READ):\n";
  print_grid(header, names, tops);
  std::cout << "\nthe right answer's probability and rank (#1 = top):\n";
  print_grid(header, names, answers);
}

// The attribution table: components in forward order, or with top > 0 the `top`
// with the largest mean |part| over the answer positions, largest first.
void print_attribution(const nlohmann::json& e, int64_t top) {
  std::cout << "\ndirect logit attribution of the right answer's logit: " << e["attribution_note"].get<std::string>()
            << "\n";
  if (e["attribution"].is_null()) return;
  const nlohmann::json& at = e["attribution"];
  std::vector<std::string> header, names;
  std::vector<double> weight;
  for (const auto& a : at) header.push_back(std::to_string(a["position"].get<int64_t>()) + ":" + glyph(a["answer"]));
  for (size_t k = 0; k < at[0]["parts"].size(); ++k) {
    names.push_back(at[0]["parts"][k]["component"]);
    weight.push_back(0);
    for (const auto& a : at) weight.back() += std::fabs(a["parts"][k]["logit"].get<double>());
  }
  std::vector<size_t> order(names.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  if (top > 0) {
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return weight[a] > weight[b]; });
    order.resize(std::min(order.size(), static_cast<size_t>(top)));
  }
  std::vector<std::string> rows_names;
  std::vector<std::vector<std::string>> rows;
  for (size_t k : order) {
    rows_names.push_back(names[k]);
    rows.emplace_back();
    for (const auto& a : at) rows.back().push_back(signed3(a["parts"][k]["logit"]));
  }
  rows_names.push_back("logit (all parts)");
  rows.emplace_back();
  for (const auto& a : at) rows.back().push_back(signed3(a["logit"]));
  print_grid(header, rows_names, rows);
}

}  // namespace

int run_lens(const Args& args) {
  LensArgs a;
  po::options_description opts = options_with_help("Options");
  po::positional_options_description positional;
  add_run_input_options(opts, positional, a.run);
  opts.add_options()
      ("json", po::bool_switch(&a.json), "print one JSON object with everything instead of the tables")
      ("top", po::value(&a.top)->default_value(0),
       "the attribution table: only the K parts of the largest mean |logit|, largest first (0: all, in forward order)")
      ("logits", po::value(&a.logits_path), "also write the lens's logits (points, 1, T, V) to FILE (.safetensors)");
  po::variables_map vm;
  if (!parse_command_line(args, opts, vm, kLensUsage, kLensExample, &positional)) return kExitOk;
  check_run_input(vm, a.run, "lens");
  if (a.top < 0) throw ValueError("--top must be >= 0, got " + std::to_string(a.top));
  omp_set_num_threads(1);

  LoadedRun loaded = load_run(RunDir(a.run.run_path), a.run.step);
  const FormattedBatch batch = lens_batch(loaded.model->config(), loaded.task->language_model(),
                                          lens_pairs(loaded, a.run.input_text));
  const LensReading reading = read_lens(*loaded.model, batch);
  nlohmann::json e = lens_example_json(loaded, batch, reading, 0);
  if (!a.logits_path.empty()) save_safetensors(a.logits_path, {{"lens", reading.logits}}, {{"points", e["points"].dump()}});
  if (a.json) {
    e.update({{"run", a.run.run_path}, {"step", loaded.step}, {"arch", name_of(loaded.model->config().arch)}});
    std::cout << e.dump() << "\n";
    return kExitOk;
  }
  std::cout << "logit lens of " << a.run.run_path << " (step " << loaded.step << ", " << name_of(loaded.model->config().arch)
            << "): each row is the residual stream after that point, decoded as the model decodes its output\n\n";
  print_lens(e);
  print_attribution(e, a.top);
  return kExitOk;
}

}  // namespace attnlab::cli
