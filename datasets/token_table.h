#pragma once
// The vocabulary of a task read from a file (pairs, text): any word or any
// character can be a token, unlike Vocab's numbered and character symbols.
//
// Ids 0..3 are the specials of vocab.h; the file's tokens follow in order of
// first appearance, so the same file always gives the same ids.
//   words: tokens are separated by whitespace ("sixty two" -> 2 tokens);
//          a token spelled "<pad>", "<bos>", "<eos>" or "<sep>" is the special.
//   chars: every UTF-8 character is a token, spaces and newlines included
//          ("ab c" -> 4 tokens); specials cannot be typed in this mode.
//
// A run keeps its table in vocab.txt (serialize/parse): a header line
// "# attnlab vocabulary: words|chars", then one token per line, specials
// first, with "\\", "\n", "\t" and "\r" escaped as \\ \n \t \r.
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "framework/choices.h"

namespace attnlab {

// How a file task cuts text into tokens (--tokenize; framework/choices.h).
enum class Tokenize { words, chars };
const ChoiceNames<Tokenize>& choice_names(Tokenize);

class TokenTable {
 public:
  using Mode = Tokenize;

  explicit TokenTable(Mode mode);

  Mode mode() const { return mode_; }
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }  // V, specials included

  // The tokens of one line of text in this mode (no ids assigned).
  std::vector<std::string> split(const std::string& text) const;
  // Id of `token`, adding it when new.
  int32_t add(const std::string& token);
  std::optional<int32_t> find(const std::string& token) const;

  // The written form of one id; ValueError for an id outside [0, V).
  const std::string& token(int32_t id) const;
  // ValueError naming the first unknown token and what the vocabulary holds.
  std::vector<int32_t> encode(const std::string& text) const;
  std::string decode(const std::vector<int32_t>& ids) const;

  std::string serialize() const;
  // IoError naming `path` and the line for a malformed table, or for bytes
  // that are not UTF-8 text (datasets/utf8.h).
  static TokenTable parse(const std::string& text, const std::string& path);

  // How a token is shown in messages: quoted, with control characters escaped,
  // shortened past 60 bytes (shortened() in framework/error.h).
  static std::string quoted(const std::string& token);

 private:
  std::string summary() const;  // a few known tokens, for error messages

  Mode mode_;
  std::vector<std::string> tokens_;  // indexed by id
  std::unordered_map<std::string, int32_t> ids_;
};

}  // namespace attnlab
