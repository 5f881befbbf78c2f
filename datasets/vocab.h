#pragma once
// Token ids shared by every task and model, and the text form of a sequence.
//
// Ids 0..3 are the specials; a task's k symbols are ids 4..4+k-1, so a model
// for that task has V = 4 + k. Two spellings of symbols exist:
//   - numbered (copy, reverse, sort, duplicate): symbol i is written as the
//     decimal number "i" (0..k-1), tokens separated by single spaces:
//     "3 1 14" <-> ids {7, 5, 18}.
//   - characters (add): each symbol is one character ("0".."9", "+"), written
//     with no separator: "123+456" <-> ids of '1','2','3','+','4','5','6'.
//     Whitespace in the text is ignored when reading ("1 2 3 + 4 5 6" is the
//     same sequence).
// Specials are written "<pad>", "<bos>", "<eos>", "<sep>" in both spellings.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace attnlab {

constexpr int32_t kPad = 0;
constexpr int32_t kBos = 1;
constexpr int32_t kEos = 2;
constexpr int32_t kSep = 3;
constexpr int32_t kNumSpecial = 4;  // first task symbol id
// The specials' written form, indexed by id (Vocab and TokenTable both write and read them).
inline constexpr const char* kSpecialTokens[kNumSpecial] = {"<pad>", "<bos>", "<eos>", "<sep>"};

class Vocab {
 public:
  // Symbols "0".."n-1", then the words of `extra` (modular: the operator and
  // "="), space separated.
  static Vocab numbered(int64_t n, std::vector<std::string> extra = {});
  // One symbol per character of `chars` (in that order), written unseparated.
  static Vocab characters(const std::string& chars);

  int64_t num_symbols() const { return static_cast<int64_t>(tokens_.size()) - kNumSpecial; }
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }  // V = 4 + symbols
  bool char_level() const { return char_level_; }

  // Id of the i-th task symbol (0-based), i.e. kNumSpecial + i.
  static int32_t symbol_id(int64_t i) { return static_cast<int32_t>(kNumSpecial + i); }
  static bool is_special(int32_t id) { return id >= 0 && id < kNumSpecial; }

  // The written form of one id; ValueError for an id outside [0, V).
  const std::string& token(int32_t id) const;
  // The id of one written token; ValueError naming the token when unknown.
  int32_t id(const std::string& token) const;

  std::string to_text(const std::vector<int32_t>& ids) const;
  std::vector<int32_t> from_text(const std::string& text) const;

 private:
  Vocab(std::vector<std::string> symbols, bool char_level);
  std::string symbols_summary() const;  // for error messages

  std::vector<std::string> tokens_;  // indexed by id, specials included
  std::unordered_map<std::string, int32_t> ids_;
  bool char_level_ = false;
  int64_t numbers_ = 0;  // numbered: the symbols "0".."numbers_-1" come first
};

}  // namespace attnlab
