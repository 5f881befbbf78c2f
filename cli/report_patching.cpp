// The report's activation patching (cli/report/patching_view.js): for each
// --clean and --corrupt pair, what `attnlab patch --json` prints for it (the
// residual stream at every position and each head at all positions).
#include "cli/patching.h"
#include "cli/report_data.h"

namespace attnlab::cli {

nlohmann::json patching_views(LoadedRun& loaded, const PatchTexts& patch_pairs) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [clean, corrupt] : patch_pairs) {
    const PatchInputs in = pair_from_texts(loaded, clean, corrupt);  // ValueError (exit 2) as patch's
    const std::vector<Patch> patches = all_patches(loaded.model->config(), in, false);
    const PatchingRun run = run_patching(*loaded.model, in.format, in.pairs, patches);
    out.push_back(patching_json(loaded, "", in, patches, run));
  }
  return out;
}

}  // namespace attnlab::cli
