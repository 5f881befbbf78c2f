#pragma once
// The embedding's Fourier spectrum of a modular run (--task modular; no flag:
// it costs p·d·p/2 multiply-adds): at every held-out evaluation's step (each
// --eval-every-th and the last), the norms framework/probe/fourier.h gives of
// the token embedding's p residue rows (tok_emb.weight rows 4 .. p+3, residue
// a at row 4 + a), into embedding_fourier.csv, a row per step and frequency:
//   step,frequency,norm      frequency k = 0 .. floor(p/2), norm unnormalised
// Read only: training is bitwise an unrecorded run's.
#include <cstdint>
#include <string>
#include <vector>

#include "framework/io/csv.h"
#include "framework/io/tfevents.h"
#include "framework/tensor.h"

namespace attnlab {

class TrainState;

// Whether a run of this state records the spectrum (its task is modular).
bool records_fourier(const TrainState& state);

// The residue rows of the state's token embedding: (p, d), row a = residue a's.
Tensor residue_embedding(const TrainState& state);

class TrainingFourier {
 public:
  // resume_step >= 0: appends to the run's CSV, dropping rows after that step.
  // IoError when the CSV cannot be written.
  TrainingFourier(const TrainState& state, const std::string& dir, int64_t resume_step);

  // The rows of `step`. IoError when the CSV cannot be written.
  void record(int64_t step);

  // Each norm also goes to `events` (null: none) as a TensorBoard scalar
  // embedding_fourier/kK; it must outlive the probe.
  void set_events(TfEventsWriter* events) { events_ = events; }

  static const std::vector<std::string>& columns();

 private:
  const TrainState& state_;
  CsvWriter csv_;
  TfEventsWriter* events_ = nullptr;
};

}  // namespace attnlab
