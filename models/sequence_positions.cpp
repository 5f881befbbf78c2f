// SequenceModel's position members: the ids a forward reads and the
// embedding at explicit positions (randomised positions, models/positions.h).
#include <algorithm>
#include <cstring>
#include <string>

#include "framework/nn/nn.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/embedding.h"
#include "models/positions.h"
#include "models/sequence_model.h"

namespace attnlab {

int64_t SequenceModel::random_positions() const { return config_.random_positions; }

Var SequenceModel::embed_at(const IntTensor& ids, const IntTensor& positions) const {
  if (positions.numel() == 0) return embed(ids, 0);
  Var h = tok_emb_->forward(ids);  // (B, T, d)
  if (learned_pos_) {
    h = h + embedding(learned_pos_->weight, positions);  // + (B, T, d)
  } else if (sin_pos_) {
    const Tensor& table = sin_pos_->table();  // (max_len, d)
    const int64_t d = table.size(1);
    Tensor rows({positions.shape[0], positions.shape[1], d});
    for (int64_t i = 0; i < positions.numel(); ++i)
      std::memcpy(rows.data() + i * d, table.data() + positions.data[static_cast<size_t>(i)] * d, sizeof(Real) * d);
    h = h + Var(std::move(rows));
  }
  return emb_dropout_->forward(h);
}

IntTensor SequenceModel::positions_for(const IntTensor& ids, const Tensor& pad, const IntTensor& given) {
  const int64_t b = ids.shape[0], t = ids.shape[1];
  if (given.numel() > 0) {
    if (given.shape != ids.shape)
      throw ShapeError("position ids " + shape_str(given.shape) + " do not match token ids " + shape_str(ids.shape));
    for (int32_t p : given.data)
      if (p < 0 || p >= config_.max_len)
        throw ValueError("position id " + std::to_string(p) + " is outside the table [0, " +
                         std::to_string(config_.max_len) + ")");
    return given;
  }
  const int64_t range = random_positions();
  if (range == 0) return IntTensor();
  const std::vector<int64_t> lengths = row_lengths(pad, b, t);
  return training() ? random_position_ids(lengths, t, range, dropout_rng_) : spread_position_ids(lengths, t, range);
}

std::vector<std::vector<int32_t>> SequenceModel::decode_positions(const std::vector<size_t>& lengths,
                                                                  const std::vector<int64_t>& budgets) const {
  std::vector<std::vector<int32_t>> tables;
  if (random_positions() == 0) return tables;
  for (size_t i = 0; i < lengths.size(); ++i)  // a prompt longer than the table was refused by check_length
    tables.push_back(decoding_positions(config_, static_cast<int64_t>(lengths[i]), budgets.at(i) - 1));
  return tables;
}

void SequenceModel::check_budgets(size_t sources, const std::vector<int64_t>& budgets) {
  if (budgets.size() != sources)
    throw ValueError("greedy decoding: " + std::to_string(budgets.size()) + " token budgets for " +
                     std::to_string(sources) + " sources; expected one per source");
}

}  // namespace attnlab
