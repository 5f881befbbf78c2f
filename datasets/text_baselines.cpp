#include "datasets/text_baselines.h"

#include <cmath>
#include <string>

#include "framework/error.h"

namespace attnlab {

namespace {

void check_ids(const std::vector<int32_t>& ids, int64_t vocab, const char* part) {
  if (ids.empty()) throw ValueError(std::string("text baselines: the ") + part + " text is empty");
  for (int32_t id : ids)
    if (id < 0 || id >= vocab)
      throw ValueError(std::string("text baselines: token id ") + std::to_string(id) + " of the " + part +
                       " text is outside the vocabulary of " + std::to_string(vocab));
}

}  // namespace

TextBaselines text_baselines(const std::vector<int32_t>& train, const std::vector<int32_t>& heldout, int64_t vocab) {
  check_ids(train, vocab, "training");
  check_ids(heldout, vocab, "held-out");
  const auto V = static_cast<size_t>(vocab);
  std::vector<double> unigram(V, 0), context(V, 0), bigram(V * V, 0);
  for (size_t i = 0; i < train.size(); ++i) {
    unigram[static_cast<size_t>(train[i])] += 1;
    if (i + 1 == train.size()) break;
    context[static_cast<size_t>(train[i])] += 1;
    bigram[static_cast<size_t>(train[i]) * V + static_cast<size_t>(train[i + 1])] += 1;
  }
  const double n = static_cast<double>(train.size()), v = static_cast<double>(vocab);
  double uni = 0, bi = 0;
  auto previous = static_cast<size_t>(train.back());
  for (int32_t id : heldout) {
    const auto c = static_cast<size_t>(id);
    uni -= std::log2((unigram[c] + 1) / (n + v));
    bi -= std::log2((bigram[previous * V + c] + 1) / (context[previous] + v));
    previous = c;
  }
  const double count = static_cast<double>(heldout.size());
  return {uni / count, bi / count, static_cast<int64_t>(heldout.size())};
}

}  // namespace attnlab
