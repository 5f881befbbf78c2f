#include "cli/report_lens.h"

#include <string>
#include <vector>

#include "cli/lens_reading.h"

namespace attnlab::cli {

nlohmann::json lens_report_data(LoadedRun& loaded, const nlohmann::json& attention) {
  nlohmann::json examples = nlohmann::json::array();
  TokenPairs pairs;
  std::vector<size_t> entry_of;  // the example of each pair
  for (const nlohmann::json& a : attention) {
    const std::string text = a["input"].get<std::string>();
    examples.push_back({{"source", a["source"]}, {"input", text}});
    try {
      for (auto& pair : lens_pairs(loaded, text)) pairs.push_back(std::move(pair));
      entry_of.push_back(examples.size() - 1);
    } catch (const ValueError& e) {
      examples.back()["note"] = std::string("no lens: ") + e.what();
    }
  }
  if (!pairs.empty()) {
    const FormattedBatch batch = lens_batch(loaded.model->config(), loaded.task->language_model(), pairs);
    const LensReading reading = read_lens(*loaded.model, batch);
    for (size_t b = 0; b < pairs.size(); ++b)
      examples[entry_of[b]].update(lens_example_json(loaded, batch, reading, static_cast<int64_t>(b)));
  }
  return {{"examples", examples}};
}

}  // namespace attnlab::cli
