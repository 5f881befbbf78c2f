#include "datasets/vocab.h"

#include <cctype>

#include "framework/error.h"

namespace attnlab {

Vocab::Vocab(std::vector<std::string> symbols, bool char_level) : char_level_(char_level) {
  tokens_.reserve(symbols.size() + kNumSpecial);
  for (const char* s : kSpecialTokens) tokens_.emplace_back(s);
  for (auto& s : symbols) tokens_.push_back(std::move(s));
  for (size_t i = 0; i < tokens_.size(); ++i) ids_.emplace(tokens_[i], static_cast<int32_t>(i));
}

Vocab Vocab::numbered(int64_t n, std::vector<std::string> extra) {
  if (n < 1) throw ValueError("Vocab::numbered: need at least 1 symbol, got " + std::to_string(n));
  std::vector<std::string> symbols;
  symbols.reserve(static_cast<size_t>(n) + extra.size());
  for (int64_t i = 0; i < n; ++i) symbols.push_back(std::to_string(i));
  for (auto& word : extra) symbols.push_back(std::move(word));
  Vocab vocab(std::move(symbols), false);
  vocab.numbers_ = n;
  return vocab;
}

Vocab Vocab::characters(const std::string& chars) {
  std::vector<std::string> symbols;
  for (char c : chars) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '<')
      throw ValueError(std::string("Vocab::characters: '") + c + "' cannot be a symbol (whitespace and '<' are reserved)");
    symbols.emplace_back(1, c);
  }
  if (symbols.empty()) throw ValueError("Vocab::characters: need at least 1 symbol");
  return Vocab(std::move(symbols), true);
}

const std::string& Vocab::token(int32_t id) const {
  if (id < 0 || id >= size())
    throw ValueError("token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(size()) + ")");
  return tokens_[static_cast<size_t>(id)];
}

int32_t Vocab::id(const std::string& token) const {
  auto it = ids_.find(token);
  if (it == ids_.end())
    throw ValueError("unknown symbol '" + shortened(token) + "' (known: " + symbols_summary() + ")");
  return it->second;
}

std::string Vocab::symbols_summary() const {
  std::string s;
  if (char_level_) {
    s = "one of \"";
    for (int64_t i = kNumSpecial; i < size(); ++i) s += tokens_[static_cast<size_t>(i)];
    s += "\"";
  } else {
    s = "0.." + std::to_string(numbers_ - 1);
    for (int64_t i = kNumSpecial + numbers_; i < size(); ++i) s += " " + tokens_[static_cast<size_t>(i)];
  }
  return s + " and <pad> <bos> <eos> <sep>";
}

std::string Vocab::to_text(const std::vector<int32_t>& ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0 && !char_level_) out += ' ';
    out += token(ids[i]);
  }
  return out;
}

std::vector<int32_t> Vocab::from_text(const std::string& text) const {
  std::vector<int32_t> ids;
  size_t i = 0;
  const size_t n = text.size();
  auto is_space = [&](size_t k) { return std::isspace(static_cast<unsigned char>(text[k])) != 0; };
  while (i < n) {
    if (is_space(i)) {
      ++i;
      continue;
    }
    size_t end;
    if (text[i] == '<') {
      // A special token: up to and including the closing '>'.
      end = text.find('>', i);
      end = (end == std::string::npos) ? n : end + 1;
    } else if (char_level_) {
      end = i + 1;
    } else {
      end = i;
      while (end < n && !is_space(end) && text[end] != '<') ++end;  // "4<eos>" reads as two tokens
    }
    ids.push_back(id(text.substr(i, end - i)));
    i = end;
  }
  return ids;
}

}  // namespace attnlab
