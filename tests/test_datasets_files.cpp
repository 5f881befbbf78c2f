// Tasks read from files (pairs, text), the vocabulary they save, the attention
// probes (induction, recall) and the "lm" batch format: outputs checked by an
// independent computation, splits disjoint and reproducible, and every bad
// file answered by an error naming the file and the line.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "datasets/splits.h"
#include "datasets/task.h"
#include "datasets/token_table.h"
#include "framework/error.h"
#include "models/batch.h"
#include "tests/fixtures.h"

using namespace attnlab;
namespace fs = std::filesystem;

namespace {

// A scratch directory of files for one test case, removed at its end.
struct Scratch {
  fs::path dir;
  explicit Scratch(const std::string& name)
      : dir(fs::temp_directory_path() / ("attnlab-files-" + name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name, std::ios::binary) << text;
    return (dir / name).string();
  }
};

TaskConfig file_config(const std::string& name, const std::string& file) {
  TaskConfig c;
  c.name = name;
  c.file = file;
  return c;
}

using testing::reverse_word_pairs;

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

}  // namespace

TEST_CASE("token tables split words and UTF-8 characters and round-trip through vocab.txt", "[datasets][files]") {
  TokenTable words_table(TokenTable::Mode::words);
  for (const auto& t : words_table.split("  sixty\ttwo  <eos> ")) words_table.add(t);
  CHECK(words_table.size() == 4 + 2);  // "<eos>" is the special, not a new word
  CHECK(words_table.encode("two sixty <eos>") == std::vector<int32_t>{5, 4, 2});
  CHECK(words_table.decode({4, 5, 2}) == "sixty two <eos>");
  CHECK_THROWS_WITH(words_table.encode("sixty three"), Catch::Contains("'three'") && Catch::Contains("'sixty'"));

  TokenTable chars(TokenTable::Mode::chars);
  const std::string text = "a b\n\\\t\xc3\xa9<eos>";  // spaces, newline, backslash, tab, a 2-byte character
  for (const auto& t : chars.split(text)) chars.add(t);
  CHECK(chars.split("\xc3\xa9").size() == 1);
  const auto ids = chars.encode(text);
  CHECK(ids.size() == 12);  // a, ' ', b, newline, backslash, tab, e-acute, '<', 'e', 'o', 's', '>' 
  CHECK(chars.decode(ids) == text);
  CHECK(std::find(ids.begin(), ids.end(), kEos) == ids.end());  // "<eos>" typed in chars mode is five characters

  const TokenTable back = TokenTable::parse(chars.serialize(), "vocab.txt");
  CHECK(back.size() == chars.size());
  CHECK(back.encode(text) == ids);
  CHECK(back.serialize() == chars.serialize());
}

TEST_CASE("a malformed vocab.txt is an IoError naming the file and line", "[datasets][files]") {
  const std::string good = TokenTable(TokenTable::Mode::words).serialize() + "x\n";
  CHECK_NOTHROW(TokenTable::parse(good, "v.txt"));
  CHECK_THROWS_AS(TokenTable::parse("hello\n", "v.txt"), IoError);
  CHECK_THROWS_WITH(TokenTable::parse("hello\n", "v.txt"), Catch::Contains("v.txt line 1"));
  CHECK_THROWS_WITH(TokenTable::parse("# attnlab vocabulary: bytes\n", "v.txt"), Catch::Contains("v.txt line 1"));
  std::string bad_special = good;
  bad_special.replace(bad_special.find("<bos>"), 5, "<xyz>");
  CHECK_THROWS_WITH(TokenTable::parse(bad_special, "v.txt"), Catch::Contains("v.txt line 3") && Catch::Contains("<bos>"));
  CHECK_THROWS_WITH(TokenTable::parse(good + "x\n", "v.txt"), Catch::Contains("v.txt line 7") && Catch::Contains("twice"));
  CHECK_THROWS_WITH(TokenTable::parse(good + "bad\\q\n", "v.txt"), Catch::Contains("v.txt line 7"));
}

TEST_CASE("pairs: examples are the file's lines, the held-out split is disjoint and fixed by the seed", "[datasets][files]") {
  Scratch s("pairs-split");
  TaskConfig c = file_config("pairs", s.write("rev.tsv", reverse_word_pairs() + "\n" + "a b c\tc b a\n"));  // blank + repeated line
  c.heldout_fraction = 0.2;
  c.seed = 5;
  const auto task = make_task(c);
  CHECK(task->vocab_size() == 4 + 5);
  CHECK(task->max_input_len() == 3);
  CHECK(task->outputs_fit_inputs());
  const auto& held = *task->own_heldout();
  CHECK(held.size() == 25);                  // round(0.2 x 125 distinct inputs)
  CHECK(task->input_space_size() == 100);    // the rest is trained on
  std::set<std::vector<int32_t>> held_inputs;
  for (const Example& e : held) {
    auto in = words(task->to_text(e.input));
    std::reverse(in.begin(), in.end());
    CHECK(words(task->to_text(e.output)) == in);  // the file's own answer
    held_inputs.insert(e.input);
  }
  Rng rng(1);
  std::set<std::vector<int32_t>> trained;
  for (int i = 0; i < 3000; ++i) {
    const Example e = task->sample(rng);
    REQUIRE(held_inputs.count(e.input) == 0);
    trained.insert(e.input);
  }
  CHECK(trained.size() == 100);  // uniform draws reach every training pair

  const auto again = make_task(c);
  CHECK(again->own_heldout()->size() == held.size());
  bool same = true;
  for (size_t i = 0; i < held.size(); ++i) same = same && (*again->own_heldout())[i].input == held[i].input;
  CHECK(same);
  c.seed = 6;
  const auto other = make_task(c);
  bool differs = false;
  for (size_t i = 0; i < held.size(); ++i) differs = differs || (*other->own_heldout())[i].input != held[i].input;
  CHECK(differs);

  CHECK(task->to_text(task->solve(task->from_text("e d c"))) == "c d e");
  CHECK_THROWS_WITH(task->solve(task->from_text("a a")), Catch::Contains("not in"));
}

TEST_CASE("pairs: a held-out file is evaluated and its inputs left out of training, chars tokenize", "[datasets][files]") {
  Scratch s("pairs-heldout");
  TaskConfig c = file_config("pairs", s.write("train.tsv", "ab\tba\nabc\tcba\nca\tac\n"));
  c.tokenize = Tokenize::chars;
  c.heldout_file = s.write("held.tsv", "ca\tac\nbb\tbb\n");
  const auto task = make_task(c);
  CHECK(task->vocab_size() == 4 + 3);
  REQUIRE(task->own_heldout()->size() == 2);
  CHECK(task->to_text((*task->own_heldout())[1].input) == "bb");
  CHECK(task->input_space_size() == 2);  // "ca" is held out
  Rng rng(3);
  for (int i = 0; i < 200; ++i) CHECK(task->to_text(task->sample(rng).input) != "ca");
  CHECK(task->from_text("cab") == std::vector<int32_t>{6, 4, 5});

  c.heldout_file = s.write("held2.tsv", "ab\tbd\n");
  CHECK_THROWS_WITH(make_task(c), Catch::Contains("held2.tsv line 1") && Catch::Contains("'d'"));
  c.heldout_file = s.write("held3.tsv", "ab\tba\nabc\tcba\nca\tac\n");
  CHECK_THROWS_WITH(make_task(c), Catch::Contains("nothing is left to train on"));
}

TEST_CASE("pairs and text: bad files are errors naming the file and the line", "[datasets][files]") {
  Scratch s("pairs-bad");
  auto error = [&](const std::string& text, const std::string& task = "pairs") {
    try {
      make_task(file_config(task, s.write("bad.txt", text)));
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string path = (s.dir / "bad.txt").string();
  CHECK_THROWS_AS(make_task(file_config("pairs", (s.dir / "missing.tsv").string())), IoError);
  CHECK_THROWS_WITH(make_task(file_config("text", (s.dir / "missing.txt").string())), Catch::Contains("missing.txt"));
  CHECK_THROWS_AS(make_task(file_config("pairs", s.write("empty.tsv", ""))), ValueError);
  CHECK_THROWS_WITH(make_task(file_config("pairs", s.write("empty.tsv", ""))), Catch::Contains("empty.tsv: the file is empty"));
  CHECK_THROWS_WITH(make_task(file_config("text", s.write("blank.txt", " \n\n"))), Catch::Contains("blank.txt: the file is empty"));
  CHECK(error("a\tb\nc d e\n") == path + " line 2: no tab between input and output (expected input<TAB>output): 'c d e'");
  CHECK(error("a\tb\t\n") == path + " line 1: more than one tab (expected input<TAB>output)");
  CHECK(error("a\tb\n\t b\n") == path + " line 2: the input is empty");
  CHECK(error("a\tb\nc\t \n") == path + " line 2: the output is empty");
  CHECK(error("a\tb\nc\td\na\tc\n") == path + " line 3: this input already appeared on line 1 with a different output");
  CHECK(error("a <sep>\tb\n").find(path + " line 1: the token <sep> is reserved") == 0);
  TaskConfig none;
  none.name = "pairs";
  CHECK_THROWS_WITH(make_task(none), Catch::Contains("--file"));
  TaskConfig text = file_config("text", s.write("short.txt", "abcdef"));
  text.seq_len = 8;
  CHECK_THROWS_WITH(make_task(text), Catch::Contains("short.txt") && Catch::Contains("--seq-len"));
}

TEST_CASE("a saved vocabulary keeps the ids of a run when its file changes", "[datasets][files]") {
  Scratch s("saved-vocab");
  TaskConfig c = file_config("pairs", s.write("p.tsv", "x y\ty x\ny z\tz y\n"));
  c.heldout_fraction = 0;
  const auto trained = make_task(c);
  const std::string vocab = trained->saved_vocab();
  REQUIRE_FALSE(vocab.empty());
  c.vocab_path = s.write("vocab.txt", vocab);
  // The same words in another order of first appearance would get other ids if rebuilt.
  s.write("p.tsv", "z y\ty z\n");
  const auto loaded = make_task(c);
  CHECK(loaded->from_text("x y z") == trained->from_text("x y z"));
  CHECK(loaded->vocab_size() == trained->vocab_size());
  TaskConfig rebuilt = file_config("pairs", (s.dir / "p.tsv").string());
  rebuilt.heldout_fraction = 0;
  CHECK(make_task(rebuilt)->from_text("z y") != trained->from_text("z y"));
  // A word the run never saw is named with its file and line.
  s.write("p.tsv", "x y\ty x\nx w\tw x\n");
  CHECK_THROWS_WITH(make_task(c), Catch::Contains("p.tsv line 2") && Catch::Contains("'w'") && Catch::Contains("vocab.txt"));
  // Without the file, a loaded run still maps text (predict, sample), but has nothing to draw or evaluate.
  fs::remove(s.dir / "p.tsv");
  const auto orphan = make_task(c);
  CHECK(orphan->from_text("y x") == trained->from_text("y x"));
  CHECK(orphan->own_heldout()->empty());
  Rng rng(0);
  CHECK_THROWS_AS(orphan->sample(rng), IoError);
}

TEST_CASE("text: windows predict the next character and the held-out tail is covered once", "[datasets][files]") {
  Scratch s("text");
  std::string body;
  for (int i = 0; i < 40; ++i) body += "line " + std::to_string(i) + " of the text\n";
  TaskConfig c = file_config("text", s.write("t.txt", body));
  c.seq_len = 16;
  c.heldout_fraction = 0.25;
  const auto task = make_task(c);
  CHECK(task->language_model());
  CHECK(task->describe().find("unigram entropy") != std::string::npos);
  Rng rng(9);
  const size_t train_chars = body.size() - body.size() / 4;
  for (int i = 0; i < 500; ++i) {
    const Example e = task->sample(rng);
    REQUIRE(e.input.size() == 16);
    REQUIRE(e.output.size() == 16);
    const std::string in = task->to_text(e.input), out = task->to_text(e.output);
    REQUIRE(in.substr(1) == out.substr(0, 15));  // shifted by one
    const size_t at = body.find(in + out.back());
    REQUIRE(at != std::string::npos);            // a real window of the file ...
    REQUIRE(at + 17 <= train_chars);             // ... inside the training part (text repeats, so find() is the earliest)
  }
  std::string covered;
  for (const Example& e : *task->own_heldout()) covered += task->to_text(e.output);
  CHECK(covered == body.substr(train_chars));  // every held-out character predicted exactly once
  CHECK(task->to_text((*task->own_heldout())[0].input)[0] == body[train_chars - 1]);  // context: the last trained character
  CHECK_THROWS_AS(task->solve(task->from_text("line")), ValueError);
}

namespace {
using testing::task_config;
}  // namespace

TEST_CASE("induction: the output is what followed the cue's earlier occurrence", "[datasets][probes]") {
  TaskConfig c = task_config("induction", 12, 5, 10);
  c.span = 3;
  const auto task = make_task(c);
  Rng rng(4);
  std::set<size_t> cue_places;
  for (int i = 0; i < 2000; ++i) {
    const Example e = task->sample(rng);
    const auto in = words(task->to_text(e.input));
    const auto out = words(task->to_text(e.output));
    REQUIRE(in.size() >= 6);
    REQUIRE(in.size() <= 11);
    const std::vector<std::string> seq(in.begin(), in.end() - 1);
    REQUIRE(std::set<std::string>(seq.begin(), seq.end()).size() == seq.size());  // distinct symbols
    const size_t p = static_cast<size_t>(std::find(seq.begin(), seq.end(), in.back()) - seq.begin());
    REQUIRE(p + 3 < seq.size());
    REQUIRE(out == std::vector<std::string>(seq.begin() + static_cast<long>(p) + 1, seq.begin() + static_cast<long>(p) + 4));
    cue_places.insert(p);
  }
  CHECK(cue_places.size() == 7);  // every place 0..6 that leaves 3 symbols after it (L up to 10)
  CHECK(task->max_output_len() == 3);
  CHECK(task->to_text(task->solve(task->from_text("5 2 8 1 9 3 7 8"))) == "1 9 3");
  CHECK_THROWS_WITH(task->solve(task->from_text("5 2 8 1 9 3 7 9")), Catch::Contains("followed by only 2"));
  CHECK_THROWS_WITH(task->solve(task->from_text("5 2 5 1 9 3 7 1")), Catch::Contains("distinct"));
  CHECK_THROWS_WITH(task->solve(task->from_text("5 2 8 1 9 3 7 4")), Catch::Contains("does not occur"));
  // 4 distinct of 4 symbols, a cue with 1 symbol after it: 4! x 3 places.
  TaskConfig tiny = task_config("induction", 4, 4, 4);
  tiny.span = 1;
  CHECK(make_task(tiny)->input_space_size() == 72);
  CHECK_THROWS_WITH(make_task(task_config("induction", 8, 9, 9)), Catch::Contains("vocab >= 9"));
  CHECK_THROWS_WITH(make_task(task_config("induction", 8, 3, 6)), Catch::Contains("min_len >= span + 1 = 4"));
}

TEST_CASE("recall: the output is the query key and the value paired with it", "[datasets][probes]") {
  const auto task = make_task(task_config("recall", 20, 2, 8));
  Rng rng(8);
  for (int i = 0; i < 2000; ++i) {
    const Example e = task->sample(rng);
    std::vector<long> in;
    for (const auto& w : words(task->to_text(e.input))) in.push_back(std::stol(w));
    REQUIRE(in.size() % 2 == 1);
    REQUIRE(in.size() >= 5);
    REQUIRE(in.size() <= 17);
    std::set<long> keys;
    long answer = -1;
    for (size_t k = 0; k + 1 < in.size(); k += 2) {
      REQUIRE(in[k] < 10);       // keys: the first half of the symbols
      REQUIRE(in[k + 1] >= 10);  // values: the second half
      keys.insert(in[k]);
      if (in[k] == in.back()) answer = in[k + 1];
    }
    REQUIRE(keys.size() == in.size() / 2);  // distinct keys
    REQUIRE(task->to_text(e.output) == std::to_string(in.back()) + " " + std::to_string(answer));
  }
  CHECK(task->to_text(task->solve(task->from_text("3 17 0 15 4 19 0"))) == "0 15");
  CHECK_THROWS_WITH(task->solve(task->from_text("3 17 0 15 4 19 5")), Catch::Contains("not one of the keys"));
  CHECK_THROWS_WITH(task->solve(task->from_text("3 17 3 15 3")), Catch::Contains("twice"));
  CHECK_THROWS_WITH(task->solve(task->from_text("3 1 3")), Catch::Contains("pair 0"));
  CHECK(make_task(task_config("recall", 4, 1, 2))->input_space_size() == 2 * 2 * 1 + 2 * 1 * 2 * 2 * 2);
  CHECK_THROWS_WITH(make_task(task_config("recall", 10, 2, 6)), Catch::Contains("vocab >= 12"));
}

TEST_CASE("induction and recall held-out sets are disjoint from their training streams", "[datasets][probes]") {
  for (const char* name : {"induction", "recall"}) {
    TaskConfig c = task_config(name, 6, 3, 3);  // small spaces, so rejection really happens
    c.span = 1;
    const auto task = make_task(c);
    const HeldOut held = make_heldout(*task, 20, 1);
    TrainStream stream(*task, held, 2);
    for (int i = 0; i < 2000; ++i) REQUIRE_FALSE(held.contains(stream.next().input));
    INFO(name);
    CHECK(stream.rejected() > 0);
  }
  CHECK(all_task_names() == std::vector<std::string>{"copy", "reverse", "sort", "add", "duplicate", "induction", "recall",
                                                     "repeat", "modular", "pairs", "text"});
}

TEST_CASE("the lm batch format trains each position on the next token", "[datasets][models]") {
  const FormattedBatch b = format_batch(BatchFormat::lm, {{{5, 6, 7}, {6, 7, 8}}, {{9}, {10}}});
  CHECK(b.input.tgt_in.shape == Shape{2, 3});
  CHECK(b.input.tgt_in.data == std::vector<int32_t>{5, 6, 7, 9, 0, 0});
  CHECK(b.targets.data == std::vector<int32_t>{6, 7, 8, 10, kIgnoreTarget, kIgnoreTarget});
  CHECK(b.input.tgt_pad[4] == 1);
  CHECK(b.input.src.numel() == 0);
  CHECK_THROWS_WITH(format_batch(BatchFormat::lm, {{{5, 6}, {6}}}), Catch::Contains("pair 0"));
}
