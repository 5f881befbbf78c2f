#include "datasets/token_table.h"

#include <cctype>

#include "datasets/utf8.h"
#include "datasets/vocab.h"
#include "framework/error.h"

namespace attnlab {

namespace {

const char* const kHeader = "# attnlab vocabulary: ";

// Bytes in the UTF-8 character starting with `lead`; 1 for a stray byte, so
// that any file can be read (a malformed sequence becomes single-byte tokens).
size_t utf8_length(const std::string& s, size_t i) {
  const auto lead = static_cast<unsigned char>(s[i]);
  size_t n = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 1;
  if (i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return 1;
  return n;
}

std::string escape(const std::string& token) {
  std::string out;
  for (char c : token) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default: out += c;
    }
  }
  return out;
}

// The inverse of escape; false for a dangling or unknown escape.
bool unescape(const std::string& line, std::string& out) {
  out.clear();
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] != '\\') {
      out += line[i];
      continue;
    }
    if (++i == line.size()) return false;
    switch (line[i]) {
      case '\\': out += '\\'; break;
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      default: return false;
    }
  }
  return true;
}

}  // namespace

TokenTable::TokenTable(Mode mode) : mode_(mode) {
  for (const char* s : kSpecialTokens) add(s);
}

const ChoiceNames<Tokenize>& choice_names(Tokenize) {
  static const ChoiceNames<Tokenize> names = {{Tokenize::words, "words", "separated by spaces"},
                                              {Tokenize::chars, "chars", "every character a token"}};
  return names;
}

std::vector<std::string> TokenTable::split(const std::string& text) const {
  std::vector<std::string> out;
  size_t i = 0;
  const size_t n = text.size();
  if (mode_ == Mode::chars) {
    while (i < n) {
      const size_t len = utf8_length(text, i);
      out.push_back(text.substr(i, len));
      i += len;
    }
    return out;
  }
  auto space = [&](size_t k) { return std::isspace(static_cast<unsigned char>(text[k])) != 0; };
  while (i < n) {
    if (space(i)) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < n && !space(end)) ++end;
    out.push_back(text.substr(i, end - i));
    i = end;
  }
  return out;
}

int32_t TokenTable::add(const std::string& token) {
  auto it = ids_.find(token);
  if (it != ids_.end()) return it->second;
  const auto id = static_cast<int32_t>(tokens_.size());
  tokens_.push_back(token);
  ids_.emplace(token, id);
  return id;
}

std::optional<int32_t> TokenTable::find(const std::string& token) const {
  auto it = ids_.find(token);
  if (it == ids_.end()) return std::nullopt;
  // In chars mode "<eos>" is five characters, never the special.
  if (mode_ == Mode::chars && it->second < kNumSpecial) return std::nullopt;
  return it->second;
}

const std::string& TokenTable::token(int32_t id) const {
  if (id < 0 || id >= size())
    throw ValueError("token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(size()) + ")");
  return tokens_[static_cast<size_t>(id)];
}

std::vector<int32_t> TokenTable::encode(const std::string& text) const {
  std::vector<int32_t> ids;
  for (const std::string& t : split(text)) {
    auto id = find(t);
    if (!id) throw ValueError("unknown token " + quoted(t) + " (the vocabulary holds " + summary() + ")");
    ids.push_back(*id);
  }
  return ids;
}

std::string TokenTable::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0 && mode_ == Mode::words) out += ' ';
    out += token(ids[i]);
  }
  return out;
}

std::string TokenTable::quoted(const std::string& token) { return "'" + escape(shortened(token)) + "'"; }

std::string TokenTable::summary() const {
  const int64_t symbols = size() - kNumSpecial;
  std::string s = std::to_string(symbols) + (mode_ == Mode::words ? " words" : " characters");
  const int64_t shown = std::min<int64_t>(symbols, 12);
  if (shown > 0) {
    s += ": ";
    for (int64_t i = 0; i < shown; ++i)
      s += (i ? " " : "") + quoted(tokens_[static_cast<size_t>(kNumSpecial + i)]);
    if (shown < symbols) s += " ...";
  }
  return s;
}

std::string TokenTable::serialize() const {
  std::string out = std::string(kHeader) + (mode_ == Mode::words ? "words" : "chars") + "\n";
  for (const std::string& t : tokens_) out += escape(t) + "\n";
  return out;
}

TokenTable TokenTable::parse(const std::string& text, const std::string& path) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  // Its tokens go into the checkpoints' JSON metadata: UTF-8 only.
  const std::string problem = utf8_text_problem(text);
  if (!problem.empty()) throw IoError(path + " " + problem);
  const std::string header(kHeader);
  if (lines.empty() || lines[0].compare(0, header.size(), header) != 0)
    throw IoError(path + " line 1: not an attnlab vocabulary (expected '" + header + "words' or '" + header + "chars')");
  Mode mode;
  try {
    mode = parse_choice<Tokenize>("tokenize", lines[0].substr(header.size()));
  } catch (const ValueError& e) {
    throw IoError(path + " line 1: " + e.what());
  }
  TokenTable table(mode);
  if (static_cast<int64_t>(lines.size()) - 1 < kNumSpecial)
    throw IoError(path + ": holds " + std::to_string(lines.size() - 1) + " tokens, expected at least the " +
                  std::to_string(kNumSpecial) + " specials");
  std::string token;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string where = path + " line " + std::to_string(i + 1);
    if (!unescape(lines[i], token)) throw IoError(where + ": malformed escape in " + quoted(lines[i]));
    const auto id = static_cast<int64_t>(i) - 1;
    if (id < kNumSpecial) {
      if (token != kSpecialTokens[id])
        throw IoError(where + ": expected the special " + std::string(kSpecialTokens[id]) + ", found " + quoted(token));
      continue;
    }
    if (token.empty()) throw IoError(where + ": empty token");
    if (table.ids_.count(token)) throw IoError(where + ": token " + quoted(token) + " appears twice");
    table.add(token);
  }
  return table;
}

}  // namespace attnlab
