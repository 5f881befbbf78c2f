// attnlab patch's result as one JSON object, which --json prints, the tables
// are drawn from and the report's patching view shows (cli/patching.h).
#include <map>

#include "cli/patching.h"

namespace attnlab::cli {

const char* const kPatchingMetric =
    "fraction of the logit difference restored, (LD_patched - LD_corrupt) / (LD_clean - LD_corrupt), "
    "LD = logit(clean answer token) - logit(corrupt answer token) at each answer position where the answers "
    "differ, summed over those positions and averaged over the pairs";

namespace {

// The ids a stack reads for the pair's clean (or corrupted) input, teacher-forced on the clean answer.
std::vector<int32_t> stack_ids(const TransformerConfig& config, BatchFormat format, const PatchingPair& pair,
                               bool corrupt, const std::string& stack) {
  const FormattedBatch b = format_batch(format, {{corrupt ? pair.corrupt : pair.clean, pair.answer}});
  const bool source = stack == "encoder." || config.arch == Arch::encoder;
  return source ? b.input.src.data : b.input.tgt_in.data;
}

nlohmann::json token_list(const Task& task, const std::vector<int32_t>& ids) {
  nlohmann::json out = nlohmann::json::array();
  for (int32_t id : ids) out.push_back(task.token_text(id));
  return out;
}

// Each stack's positions: their clean and corrupted tokens (one pair; null over
// several) and the positions where the inputs differ.
nlohmann::json stacks_json(const LoadedRun& loaded, const PatchInputs& in) {
  const TransformerConfig& c = loaded.model->config();
  const PatchingPair& first = in.pairs.front();
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [stack, n] : stack_positions(c, in.format, first)) {
    const std::vector<int32_t> clean = stack_ids(c, in.format, first, false, stack);
    const std::vector<int32_t> corrupt = stack_ids(c, in.format, first, true, stack);
    nlohmann::json corrupted = nlohmann::json::array();
    for (size_t t = 0; t < clean.size(); ++t)
      if (clean[t] != corrupt[t]) corrupted.push_back(t);
    const bool one = in.pairs.size() == 1;
    out.push_back({{"stack", stack}, {"positions", n}, {"corrupted", corrupted},
                   {"clean_tokens", one ? token_list(*loaded.task, clean) : nlohmann::json()},
                   {"corrupt_tokens", one ? token_list(*loaded.task, corrupt) : nlohmann::json()}});
  }
  return out;
}

// The fractions restored by each patch (in the order of `patches`), grouped as the output shows them.
nlohmann::json block_json(const std::vector<Patch>& patches, const LdSums& sums) {
  const std::vector<double> f = fractions_restored(sums);
  nlohmann::json residual = nlohmann::json::array(), heads = nlohmann::json::array(), each = nlohmann::json::array();
  std::map<std::string, size_t> row;  // residual point or head -> its row in residual or each
  for (size_t p = 0; p < patches.size(); ++p) {
    const Patch& patch = patches[p];
    if (patch.kind == PatchKind::head) {
      heads.push_back({{"name", patch.name}, {"stack", patch.stack}, {"value", f[p]}});
      continue;
    }
    nlohmann::json& rows = patch.kind == PatchKind::residual ? residual : each;
    const std::string key = (patch.kind == PatchKind::residual ? "r:" : "h:") + patch.name;
    if (!row.count(key)) {
      row[key] = rows.size();
      rows.push_back({{patch.kind == PatchKind::residual ? "point" : "name", patch.name}, {"stack", patch.stack},
                      {"values", nlohmann::json::array()}});
    }
    rows[row[key]]["values"].push_back(f[p]);
  }
  return {{"ld_clean", sums.clean}, {"ld_corrupt", sums.corrupt}, {"residual", residual}, {"heads", heads},
          {"heads_per_position", each}};
}

nlohmann::json examples_json(const Task& task, const PatchInputs& in) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < in.clean.size(); ++i)
    out.push_back({{"clean", task.to_text(in.clean[i].input)}, {"clean_answer", task.to_text(in.clean[i].output)},
                   {"corrupt", task.to_text(in.corrupt[i].input)}, {"corrupt_answer", task.to_text(in.corrupt[i].output)}});
  return out;
}

}  // namespace

nlohmann::json patching_json(const LoadedRun& loaded, const std::string& run_path, const PatchInputs& in,
                             const std::vector<Patch>& patches, const PatchingRun& run) {
  const Task& task = *loaded.task;
  const bool one = in.corrupt_token < 0;
  nlohmann::json out = {{"run", run_path},
                        {"step", loaded.step},
                        {"model", name_of(loaded.model->config().arch)},
                        {"metric", kPatchingMetric},
                        {"mode", one ? "pair" : "corrupt_token"},
                        {"corrupt_token", one ? nlohmann::json() : nlohmann::json(in.corrupt_token)},
                        {"pairs", in.pairs.size()},
                        {"skipped", in.skipped},
                        {"examples", examples_json(task, in)},
                        {"stacks", stacks_json(loaded, in)},
                        {"total", block_json(patches, ld_sums(run))},
                        {"answers", nlohmann::json::array()}};
  if (!one) return out;
  const std::vector<AnswerSlot>& slots = in.pairs.front().answers;
  for (size_t s = 0; s < slots.size(); ++s) {
    nlohmann::json a = block_json(patches, ld_sums(run, 0, static_cast<int64_t>(s)));
    a.update({{"index", slots[s].index}, {"row", slots[s].row}, {"clean_token", task.token_text(slots[s].clean)},
              {"corrupt_token", task.token_text(slots[s].corrupt)}});
    out["answers"].push_back(std::move(a));
  }
  return out;
}

}  // namespace attnlab::cli
