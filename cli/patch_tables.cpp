// attnlab patch's tables, drawn from its JSON result (cli/patching.h): rows the
// residual stream's hook points or the heads, columns the positions.
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/patching.h"

namespace attnlab::cli {

namespace {

// A fraction as the tables show it: two decimals, "n/a" where it is undefined (null).
std::string cell(const nlohmann::json& v) {
  if (v.is_null()) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v.get<double>());
  return buf;
}

// The column labels of a stack: its tokens, "clean/corrupt" where they differ
// (over several pairs: the position's index), "*" marking a corrupted position.
std::vector<std::string> column_labels(const nlohmann::json& stack) {
  std::vector<std::string> out;
  const auto n = stack["positions"].get<size_t>();
  for (size_t t = 0; t < n; ++t) {
    bool corrupted = false;
    for (const auto& c : stack["corrupted"]) corrupted = corrupted || c.get<size_t>() == t;
    std::string label = std::to_string(t);
    if (!stack["clean_tokens"].is_null()) {
      label = stack["clean_tokens"][t].get<std::string>();
      if (corrupted) label += "/" + stack["corrupt_tokens"][t].get<std::string>();
    }
    out.push_back(corrupted ? label + "*" : label);
  }
  return out;
}

// One table: a title over the row names, then each row's values under the labels.
void print_table(const std::string& title, const std::vector<std::string>& labels,
                 const std::vector<std::pair<std::string, nlohmann::json>>& rows) {
  size_t name_width = title.size();
  for (const auto& r : rows) name_width = std::max(name_width, r.first.size());
  std::vector<size_t> width;
  for (const std::string& l : labels) width.push_back(std::max<size_t>(6, l.size() + 1));
  std::cout << title << std::string(name_width - title.size(), ' ');
  for (size_t t = 0; t < labels.size(); ++t) std::cout << std::string(width[t] - labels[t].size(), ' ') << labels[t];
  std::cout << "\n";
  for (const auto& [name, values] : rows) {
    std::cout << name << std::string(name_width - name.size(), ' ');
    for (size_t t = 0; t < labels.size(); ++t) {
      const std::string c = cell(values[t]);
      std::cout << std::string(width[t] - c.size(), ' ') << c;
    }
    std::cout << "\n";
  }
}

std::string stack_title(const std::string& stack, const std::string& what) {
  return stack.empty() ? what : stack.substr(0, stack.size() - 1) + " " + what;
}

// The residual stream and the heads of one answer (or of the total), stack by stack.
void print_block(const nlohmann::json& result, const nlohmann::json& block) {
  std::cout << std::fixed << std::setprecision(4) << "LD_clean " << block["ld_clean"].get<double>() << ", LD_corrupt "
            << block["ld_corrupt"].get<double>() << "\n";
  for (const auto& stack : result["stacks"]) {
    const std::string name = stack["stack"];
    std::vector<std::pair<std::string, nlohmann::json>> residual, each;
    for (const auto& r : block["residual"])
      if (r["stack"] == name) residual.emplace_back(r["point"], r["values"]);
    for (const auto& h : block["heads_per_position"])
      if (h["stack"] == name) each.emplace_back(h["name"], h["values"]);
    print_table(stack_title(name, "residual stream"), column_labels(stack), residual);
    if (!each.empty()) print_table(stack_title(name, "heads per position"), column_labels(stack), each);
  }
  std::vector<std::pair<std::string, nlohmann::json>> heads;
  for (const auto& h : block["heads"]) heads.emplace_back(h["name"], nlohmann::json::array({h["value"]}));
  print_table("heads (all positions)", {"all"}, heads);
}

// `text` in lines of at most 80 columns, the first after `lead`, the others indented by two.
void print_wrapped(const std::string& lead, const std::string& text) {
  std::istringstream words(text);
  std::string word, line = lead;
  while (words >> word) {
    if (line.size() + 1 + word.size() > 80 && line.size() > lead.size()) {
      std::cout << line << "\n";
      line = " ";
    }
    line += " " + word;
  }
  std::cout << line << "\n";
}

void print_inputs(const nlohmann::json& r) {
  std::cout << "activation patching of " << r["run"].get<std::string>() << " (step " << r["step"] << ", "
            << r["model"].get<std::string>() << ")\n";
  if (r["mode"] == "pair") {
    const auto& e = r["examples"][0];
    std::cout << "clean    " << e["clean"].get<std::string>() << "  ->  " << e["clean_answer"].get<std::string>() << "\n"
              << "corrupt  " << e["corrupt"].get<std::string>() << "  ->  " << e["corrupt_answer"].get<std::string>()
              << "\n";
  } else {
    std::cout << r["pairs"] << " held-out inputs with the symbol at position " << r["corrupt_token"]
              << " changed (" << r["skipped"] << " left out: no other symbol changes their answer)\n";
  }
  print_wrapped("metric:", kPatchingMetric);
}

}  // namespace

void print_patching(const nlohmann::json& r) {
  print_inputs(r);
  const nlohmann::json& answers = r["answers"];
  if (answers.size() != 1) {
    std::cout << "\n"
              << (r["mode"] == "pair" ? "all " + std::to_string(answers.size()) + " answer positions that differ"
                                      : "every pair's answer positions that differ")
              << ": ";
    print_block(r, r["total"]);
  }
  for (const auto& a : answers) {
    std::cout << "\nanswer position " << a["index"] << " (clean " << a["clean_token"].get<std::string>() << ", corrupt "
              << a["corrupt_token"].get<std::string>() << "): ";
    print_block(r, a);
  }
}

}  // namespace attnlab::cli
