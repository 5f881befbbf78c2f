// predict --json and eval --json through the attnlab executable: one JSON
// object each, at full precision, saying what the text output says.
#include <catch2/catch.hpp>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "tests/cli_harness.h"

using attnlab::testing::run_attnlab;
using attnlab::testing::TempDir;
using nlohmann::json;

namespace {

const std::string kTiny =
    " --vocab 5 --min-len 3 --max-len 4 --d-model 16 --heads 2 --layers 1 --d-ff 32 --batch-size 16 --heldout 20"
    " --steps 40 --eval-every 40 --lr 3e-3 --threads 1 --quiet";

json parse_output(const attnlab::testing::CliResult& r) {
  INFO(r.out);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}

// The shortest decimal of the float nearest `p`, read back: equal to p only
// when p was written in that form (not a float widened to double).
double shortest_float_form(double p) {
  char buf[64];
  const auto end = std::to_chars(buf, buf + sizeof buf, static_cast<float>(p)).ptr;
  return std::strtod(std::string(buf, end).c_str(), nullptr);
}

// The percentage a text line "LABEL  12.34%" shows.
std::string shown_percent(const std::string& out, const std::string& label) {
  std::smatch m;
  REQUIRE(std::regex_search(out, m, std::regex(label + " +([0-9.]+)%")));
  return m[1];
}

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", 100 * fraction);
  return buf;
}

}  // namespace

TEST_CASE("predict --json holds the input, the answer and every decoded position's full distribution, whose argmax "
          "is the answer, for every model kind",
          "[cli][json]") {
  TempDir tmp("cli-json-predict");
  for (const std::string arch : {"encoder", "decoder", "seq2seq"}) {
    INFO(arch);
    const std::string run = tmp / arch;
    REQUIRE(run_attnlab("train --task reverse --model " + arch + kTiny + " --run " + run).code == 0);
    const auto text = run_attnlab("predict --run " + run + " \"1 2 3 4\"");
    REQUIRE(text.code == 0);
    const json j = parse_output(run_attnlab("predict --json --run " + run + " \"1 2 3 4\""));
    CHECK(j.at("input").at("text") == "1 2 3 4");
    CHECK(j.at("input").at("ids") == json::array({5, 6, 7, 8}));
    CHECK(text.out.substr(0, text.out.find('\n')) == j.at("answer").at("text").get<std::string>());
    CHECK(j.at("expected").at("text") == "4 3 2 1");
    CHECK(j.at("correct") == (j.at("answer") == j.at("expected")));
    const json& answer = j.at("answer").at("ids");
    const json& positions = j.at("positions");
    const size_t V = j.at("vocabulary").size();
    CHECK(V == 9);
    // The encoder tags each input position; the others decode up to the <eos> they stop at.
    CHECK(positions.size() == answer.size() + (arch == "encoder" ? 0 : 1));
    for (size_t k = 0; k < positions.size(); ++k) {
      const json& p = positions[k];
      const auto probs = p.at("probabilities").get<std::vector<double>>();
      REQUIRE(probs.size() == V);
      double sum = 0;
      size_t argmax = 0;
      for (size_t i = 0; i < V; ++i) {
        sum += probs[i];
        if (probs[i] > probs[argmax]) argmax = i;
        CHECK(shortest_float_form(probs[i]) == probs[i]);
      }
      CHECK(std::abs(sum - 1) < 1e-5);
      CHECK(p.at("token") == argmax);
      CHECK(p.at("token") == (k < answer.size() ? answer[k].get<int>() : 2));  // 2: <eos>
      CHECK(p.at("token_text") == j.at("vocabulary")[p.at("token").get<size_t>()]);
    }
  }
  const auto both = run_attnlab("predict --json --logits --run " + tmp / "encoder" + " \"1 2\"");
  CHECK(both.code == 2);
  CHECK(both.out.find("--json") != std::string::npos);
}

TEST_CASE("eval --json gives the figures the text output shows, at full precision, and the --examples",
          "[cli][json]") {
  TempDir tmp("cli-json-eval");
  const std::string run = tmp / "run";
  REQUIRE(run_attnlab("train --task reverse" + kTiny + " --run " + run).code == 0);
  const auto text = run_attnlab("eval --run " + run + " --examples 3");
  REQUIRE(text.code == 0);
  const json j = parse_output(run_attnlab("eval --json --run " + run + " --examples 3"));
  CHECK(percent(j.at("exact_match")) == shown_percent(text.out, "exact match"));
  CHECK(percent(j.at("token_accuracy")) == shown_percent(text.out, "token accuracy"));
  CHECK(text.out.find(", " + std::to_string(j.at("examples_evaluated").get<int>()) + " examples, the held-out set") !=
        std::string::npos);
  CHECK(j.at("step") == 40);
  REQUIRE(j.at("examples").size() == 3);
  for (const json& e : j.at("examples")) {
    const std::string line = "  " + e.at("input").get<std::string>() + "  ->  " + e.at("answer").get<std::string>() +
                             (e.at("correct") ? "   (correct)" : "   (expected " + e.at("expected").get<std::string>() + ")");
    CHECK(text.out.find(line + "\n") != std::string::npos);
  }
}

TEST_CASE("eval --json of a language model gives the loss, bits per character and accuracy the text output shows",
          "[cli][json]") {
  TempDir tmp("cli-json-eval-lm");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the cat sat on the mat. ";
  std::ofstream(tmp / "text.txt") << text;
  const std::string run = tmp / "lm";
  REQUIRE(run_attnlab("train --task text --model decoder --file " + tmp / "text.txt" +
                      " --seq-len 16 --d-model 16 --heads 2 --layers 1 --d-ff 32 --steps 10 --eval-every 10 --quiet"
                      " --run " + run)
              .code == 0);
  const auto shown = run_attnlab("eval --run " + run);
  REQUIRE(shown.code == 0);
  const json j = parse_output(run_attnlab("eval --json --run " + run));
  char loss[32], bits[32];
  std::snprintf(loss, sizeof loss, "%.4f", j.at("loss").get<double>());
  std::snprintf(bits, sizeof bits, "%.4f", j.at("bits_per_character").get<double>());
  CHECK(shown.out.find("loss               " + std::string(loss) + " nats per character") != std::string::npos);
  CHECK(shown.out.find("bits per character " + std::string(bits)) != std::string::npos);
  CHECK(percent(j.at("next_char_accuracy")) == shown_percent(shown.out, "next-char accuracy"));
  CHECK(shown.out.find(std::to_string(j.at("characters").get<int>()) + " held-out characters") != std::string::npos);
}
