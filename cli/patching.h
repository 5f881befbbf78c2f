#pragma once
// What `attnlab patch` computes for a run (interventions/patching.h), shared
// with `attnlab report`'s patching view: the clean and corrupted pairs, the
// patches, and the result as one JSON object (docs/interventions.md,
// "Activation patching").
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/load_run.h"
#include "interventions/patching.h"

namespace attnlab::cli {

// The pairs a patching runs over, with each input's own answer.
struct PatchInputs {
  BatchFormat format = BatchFormat::encoder;
  std::vector<PatchingPair> pairs;
  std::vector<Example> clean, corrupt;  // pair by pair: the input and its own answer
  int64_t corrupt_token = -1;           // K with --corrupt-token; -1: one given pair
  size_t skipped = 0;                   // held-out inputs left out (no corruption the task answers differently)
};

// One pair from the texts of --clean and --corrupt. ValueError naming the flag
// and its text for an input the task cannot parse or answer; for inputs of
// different lengths (both lengths); for answers that agree everywhere.
PatchInputs pair_from_texts(LoadedRun& loaded, const std::string& clean, const std::string& corrupt);

// --corrupt-token K over `count` held-out inputs: the held-out inputs in order,
// those of the length of the first one longer than K, each with the symbol at
// position K (0 = the first) replaced by the first of the other symbols, in
// an order drawn from Rng(seed), for which the task has an answer that
// differs from the clean one (a language model: one drawn symbol, kept when
// its next-token prediction changes). ValueError for K out of range or when no
// input can be corrupted so.
PatchInputs pairs_from_corrupt_token(LoadedRun& loaded, int64_t k, int64_t count, uint64_t seed);

// Every patch `attnlab patch` runs: the residual stream at every (point,
// position), every head at all positions, and with per_position every head at
// each position.
std::vector<Patch> all_patches(const TransformerConfig& config, const PatchInputs& in, bool per_position);

// The result as one object (docs/interventions.md lists its fields): the run,
// the metric in words, the pairs, the stacks' positions and tokens, and per
// answer the fractions restored of the residual stream, the heads and (when
// patched) the heads per position; "total" sums the LDs over every answer
// position and averages them over the pairs.
nlohmann::json patching_json(const LoadedRun& loaded, const std::string& run_path, const PatchInputs& in,
                             const std::vector<Patch>& patches, const PatchingRun& run);

// The same as tables: rows the residual points or heads, columns positions
// labelled by their tokens ("clean/corrupt" where they differ).
void print_patching(const nlohmann::json& result);

// The metric, named as the output names it.
extern const char* const kPatchingMetric;

}  // namespace attnlab::cli
