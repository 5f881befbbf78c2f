// --task repeat through the attnlab executable: a model learns to copy the
// repeat from context (the in-context loss falls from 0 to about -ln vocab),
// what train and eval print and record, and the columns every run gains
// (heldout_loss at each evaluation, weight_norm in every row).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include "framework/io/safetensors.h"
#include "tests/cli_harness.h"
#include "tests/metrics_column.h"
#include <nlohmann/json.hpp>

using attnlab::testing::checkpoint_stem;
using attnlab::testing::metrics_column;
using attnlab::testing::read_summary;
using attnlab::testing::run_attnlab;
using attnlab::testing::TempDir;

namespace {

const std::string kRepeat =
    " --task repeat --vocab 16 --min-len 8 --max-len 8 --model decoder --layers 2 --heads 2 --d-model 32 --d-ff 64"
    " --batch-size 32 --lr 3e-3 --threads 1 --quiet";

}  // namespace

TEST_CASE("attnlab train --task repeat: the in-context loss falls from about 0 to about -ln vocab as the repeat is "
          "learned", "[cli][repeat]") {
  TempDir dir("cli-repeat");
  const std::string run = dir / "run";
  REQUIRE(run_attnlab("train" + kRepeat + " --steps 300 --eval-every 150 --log-every 50 --run " + run).code == 0);
  const auto in_context = metrics_column(run, "in_context_loss"), heldout = metrics_column(run, "heldout_loss");
  REQUIRE(in_context.size() == 6);
  for (size_t i : {0, 1, 3, 4}) CHECK(in_context[i].empty());  // rows without an evaluation
  CHECK(std::stod(in_context[5]) < -0.8 * std::log(16.0));     // the repeat is nearly free, the first copy is not
  CHECK(std::stod(heldout[5]) < 0.6 * std::log(16.0));          // about half of the targets are noise
  const nlohmann::json s = read_summary(run);
  CHECK(s["heldout_late_token_acc"].get<double>() > 0.95);
  CHECK(s["heldout_in_context_loss"].get<double>() == Approx(std::stod(in_context[5])));
  CHECK(s["heldout_tokens"].get<int64_t>() == 500 * 15);  // the default held-out windows, 2L - 1 targets each
  CHECK(s["heldout_bits_per_token"].get<double>() == Approx(s["heldout_loss"].get<double>() / std::log(2.0)));

  // Untrained (one step), the repeat is as unpredictable as the first copy.
  REQUIRE(run_attnlab("train" + kRepeat + " --steps 1 --eval-every 1 --run " + dir / "untrained").code == 0);
  CHECK(std::fabs(read_summary(dir / "untrained")["heldout_in_context_loss"].get<double>()) < 0.1);

  const auto eval = run_attnlab("eval --run " + run);
  REQUIRE(eval.code == 0);
  CHECK(eval.out.find("7500 held-out tokens (500 windows)\n") != std::string::npos);
  CHECK(eval.out.find("next-token accuracy ") != std::string::npos);
  CHECK(eval.out.find("in-context loss    -") != std::string::npos);
  // ablate scores the same windows teacher-forced: its intact in-context figures are the evaluation's.
  const auto ablate = run_attnlab("ablate --run " + run + " --json --what blocks.0.attn.h0,blocks.1.attn.h1");
  REQUIRE(ablate.code == 0);
  const nlohmann::json a = nlohmann::json::parse(ablate.out);
  CHECK(a["intact"]["in_context_loss"].get<double>() == Approx(s["heldout_in_context_loss"].get<double>()).epsilon(1e-9));
  CHECK(a["intact"]["late_token_accuracy"].get<double>() == Approx(s["heldout_late_token_acc"].get<double>()));
  for (const auto& row : a["rows"]) {
    CHECK(row["delta_late_token_accuracy"].get<double>() ==
          Approx(row["late_token_accuracy"].get<double>() - a["intact"]["late_token_accuracy"].get<double>()));
    CHECK(row["delta_in_context_loss"].get<double>() ==
          Approx(row["in_context_loss"].get<double>() - a["intact"]["in_context_loss"].get<double>()));
  }
  const auto table = run_attnlab("ablate --run " + run + " --top 1");
  CHECK(table.out.find("    token      late      loss   d.token    d.late    d.loss") != std::string::npos);
  const auto longer = run_attnlab("eval --run " + run + " --len 12 --heldout 50 --json");
  REQUIRE(longer.code == 0);
  const nlohmann::json j = nlohmann::json::parse(longer.out);
  CHECK(j["tokens"].get<int64_t>() == 50 * 23);
  CHECK(j["evaluated"] == "held-out tokens (50 windows with sequences of length 12)");
  CHECK(j.contains("in_context_loss"));
}

TEST_CASE("metrics.csv: heldout_loss at every evaluation of a sequence task, weight_norm the parameters' norm in every "
          "row", "[cli][metrics]") {
  TempDir dir("cli-weight-norm");
  const std::string run = dir / "run";
  REQUIRE(run_attnlab("train --task reverse --vocab 5 --min-len 3 --max-len 4 --d-model 16 --heads 2 --layers 1 --d-ff 32"
                      " --heldout 20 --target 0 --steps 6 --log-every 2 --eval-every 3 --threads 1 --quiet --run " + run)
              .code == 0);
  const auto heldout = metrics_column(run, "heldout_loss"), norms = metrics_column(run, "weight_norm");
  REQUIRE(metrics_column(run, "step") == std::vector<std::string>{"2", "3", "4", "6"});  // a row at each log and evaluation
  CHECK(heldout[0].empty());
  CHECK(heldout[2].empty());
  CHECK(std::stod(heldout[1]) > std::stod(heldout[3]));  // learning
  CHECK(std::stod(heldout[3]) == Approx(read_summary(run)["heldout_loss"].get<double>()));
  for (const std::string& cell : metrics_column(run, "in_context_loss")) CHECK(cell.empty());  // not a language model
  double sum = 0;
  for (const auto& [name, t] : attnlab::load_safetensors(checkpoint_stem(run, 6) + ".safetensors").tensors)
    for (int64_t i = 0; i < t.numel(); ++i) sum += static_cast<double>(t[i]) * t[i];
  CHECK(std::stod(norms[3]) == Approx(std::sqrt(sum)).epsilon(1e-12));
  CHECK(std::stod(norms[0]) != std::stod(norms[3]));
}
