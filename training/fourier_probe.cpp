#include "training/fourier_probe.h"

#include <cassert>
#include <cstring>

#include "framework/probe/fourier.h"
#include "training/train_state.h"

namespace attnlab {

namespace {

CsvWriter open_fourier_csv(const std::string& path, int64_t resume_step) {
  if (resume_step < 0) return CsvWriter(path, TrainingFourier::columns());
  keep_csv_rows_through(path, resume_step);
  return CsvWriter::append(path, TrainingFourier::columns());
}

}  // namespace

bool records_fourier(const TrainState& state) { return state.task().name() == "modular"; }

Tensor residue_embedding(const TrainState& state) {
  const int64_t p = state.settings().task.modulus;
  Tensor E;  // (V, d): every model has one token embedding, tok_emb (models/sequence_model.h)
  for (const auto& [name, var] : state.model().named_parameters())
    if (name == "tok_emb.weight") E = var.value();
  assert(E.dim() == 2 && E.size(0) >= Vocab::symbol_id(p));
  const int64_t d = E.size(1);
  Tensor rows({p, d});
  std::memcpy(rows.data(), E.data() + Vocab::symbol_id(0) * d, static_cast<size_t>(p * d) * sizeof(Real));
  return rows;
}

const std::vector<std::string>& TrainingFourier::columns() {
  static const std::vector<std::string> c = {"step", "frequency", "norm"};
  return c;
}

TrainingFourier::TrainingFourier(const TrainState& state, const std::string& dir, int64_t resume_step)
    : state_(state), csv_(open_fourier_csv(dir + "/embedding_fourier.csv", resume_step)) {}

void TrainingFourier::record(int64_t step) {
  const std::vector<double> norms = fourier_norms(residue_embedding(state_));
  const std::string s = std::to_string(step);
  for (size_t k = 0; k < norms.size(); ++k) {
    csv_.row({s, std::to_string(k), CsvWriter::format_number(norms[k])});
    if (events_) events_->scalar("embedding_fourier/k" + std::to_string(k), step, norms[k]);
  }
}

}  // namespace attnlab
