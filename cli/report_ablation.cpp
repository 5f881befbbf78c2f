// The report's ablation view (cli/report/ablation_view.js): every head, MLP
// and layer zero-ablated on the first held-out examples, the figures as
// `attnlab ablate --mode zero --heldout N --json` prints them for the same run.
#include <algorithm>

#include "cli/ablate.h"
#include "cli/report_data.h"
#include "interventions/ablation_budget.h"

namespace attnlab::cli {

nlohmann::json ablation_view_data(LoadedRun& loaded) {
  if (loaded.task->own_heldout() && loaded.task->own_heldout()->empty()) return nullptr;
  // A generated task's held-out set is as large as trained: the first of it, never more.
  const int64_t count = loaded.task->own_heldout() ? kReportAblationExamples
                                                   : std::min<int64_t>(kReportAblationExamples, loaded.settings.heldout);
  std::vector<Example> examples = ablation_examples(loaded, count, "");
  const TransformerConfig& c = loaded.model->config();
  examples.resize(examples_within(*loaded.model, examples, kReportAblationFlops, kReportAblationMinimum));
  const TeacherForcedSet set = teacher_forced_set(c, loaded.task->language_model(), examples, kAblationBatch, loaded.task.get());
  const AblationResult result = ablate(*loaded.model, set, model_components(c), AblationMode::zero, 0);
  return ablation_json(loaded, result, AblationMode::zero, 0);
}

}  // namespace attnlab::cli
