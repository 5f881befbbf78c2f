// The clean and corrupted pairs of `attnlab patch` and the report: from the
// texts of --clean and --corrupt, or generated from held-out inputs
// (--corrupt-token K), each input with its own answer (cli/patching.h).
#include <algorithm>
#include <optional>

#include "cli/patching.h"
#include "datasets/splits.h"

namespace attnlab::cli {

namespace {

// The ids of `flag`'s text (no note yet; ValueError naming the flag and the text).
std::vector<int32_t> ids_of(const Task& task, const std::string& flag, const std::string& text) {
  try {
    return task.from_text(text);
  } catch (const ValueError& e) {
    throw ValueError(flag + " \"" + text + "\": " + e.what());
  }
}

// `flag`'s input checked as predict checks it (a note on stderr for an unusual length), or a
// language model's text (at most its training context); ValueError naming the flag and the text.
void check_input(LoadedRun& loaded, const std::string& flag, const std::string& text, size_t length) {
  try {
    if (!loaded.task->language_model()) {
      parse_input(loaded, text);
      return;
    }
    const auto context = static_cast<size_t>(std::min<int64_t>(loaded.model->config().max_len, loaded.settings.task.seq_len));
    if (length == 0) throw ValueError("the input text is empty");
    if (length > context)
      throw ValueError("the text has " + std::to_string(length) + " characters; this model reads at most " +
                       std::to_string(context) + " (its training context)");
  } catch (const ValueError& e) {
    throw ValueError(flag + " \"" + text + "\": " + e.what());
  }
}

// A language model's answers: the most likely next token after each text (all of one length), one forward.
std::vector<int32_t> next_tokens(SequenceModel& model, const std::vector<std::vector<int32_t>>& texts) {
  TokenPairs rows;
  for (const auto& t : texts) rows.emplace_back(t, t);
  InferenceGuard guard(model);
  const Tensor logits = model.forward(format_batch(BatchFormat::lm, rows).input).value();  // (B, T, V)
  const int64_t T = logits.size(1), V = logits.size(2);
  std::vector<int32_t> out;
  for (size_t b = 0; b < texts.size(); ++b) {
    const Real* last = logits.data() + (static_cast<int64_t>(b) * T + T - 1) * V;
    out.push_back(static_cast<int32_t>(std::max_element(last, last + V) - last));
  }
  return out;
}

// The task's answer to `flag`'s input; ValueError naming the flag and the text.
std::vector<int32_t> answer_of(const Task& task, const std::string& flag, const std::string& text,
                               const std::vector<int32_t>& input) {
  try {
    return task.solve(input);
  } catch (const ValueError& e) {
    throw ValueError(flag + " \"" + text + "\": the task cannot answer it (" + e.what() + ")");
  }
}

// ValueError unless the pair's sequences fit the model's positional table.
void check_fits(const LoadedRun& loaded, const PatchInputs& in) {
  const TransformerConfig& c = loaded.model->config();
  for (const auto& [stack, n] : stack_positions(c, in.format, in.pairs.front()))
    if (n > c.max_len)
      throw ValueError("the " + (stack.empty() ? std::string("model") : stack.substr(0, stack.size() - 1)) +
                       " would read " + std::to_string(n) + " positions (the input and its answer); this model has " +
                       std::to_string(c.max_len));
}

std::vector<Example> heldout_inputs(const LoadedRun& loaded) {
  if (const std::vector<Example>* own = loaded.task->own_heldout()) return *own;
  return make_heldout(*loaded.task, loaded.settings.heldout, derive_seed(loaded.settings.seed, kHeldoutStream)).examples();
}

// `e` with its symbol at k replaced by the first other symbol (in an order
// drawn from rng) that the task answers differently with an answer of the
// same length; none when no symbol does.
std::optional<Example> corrupted(const Task& task, const Example& e, int64_t k, Rng& rng) {
  std::vector<int32_t> symbols;
  for (int32_t id = SpecialTokens::count; id < task.vocab_size(); ++id)
    if (id != e.input[static_cast<size_t>(k)]) symbols.push_back(id);
  for (size_t i = symbols.size(); i > 1; --i) std::swap(symbols[i - 1], symbols[static_cast<size_t>(rng.integer(0, static_cast<int64_t>(i) - 1))]);
  for (int32_t s : symbols) {
    Example x{e.input, {}};
    x.input[static_cast<size_t>(k)] = s;
    try {
      x.output = task.solve(x.input);
    } catch (const ValueError&) {
      continue;  // an input the task cannot answer (add: a second '+')
    }
    if (x.output.size() == e.output.size() && x.output != e.output) return x;
  }
  return std::nullopt;
}

// ValueError unless some held-out input has a position k; the inputs that do, of the first one's length.
std::vector<Example> inputs_with_position(const std::vector<Example>& heldout, int64_t k) {
  size_t longest = 0;
  for (const Example& e : heldout) longest = std::max(longest, e.input.size());
  if (k < 0 || static_cast<size_t>(k) >= longest)
    throw ValueError("--corrupt-token " + std::to_string(k) + " is out of range: the held-out inputs have at most " +
                     std::to_string(longest) + " tokens (positions 0-" + std::to_string(longest - 1) + ")");
  std::vector<Example> out;
  for (const Example& e : heldout)
    if (e.input.size() > static_cast<size_t>(k) && (out.empty() || e.input.size() == out[0].input.size()) &&
        (out.empty() || e.output.size() == out[0].output.size()))
      out.push_back(e);
  return out;
}

// A language model's pairs: each window with one drawn symbol at k, kept when its next-token prediction changes.
void language_model_pairs(LoadedRun& loaded, const std::vector<Example>& windows, int64_t k, Rng& rng, PatchInputs& in) {
  std::vector<std::vector<int32_t>> texts;
  for (const Example& w : windows) {
    std::vector<int32_t> c = w.input;
    const auto others = static_cast<int64_t>(loaded.task->vocab_size() - SpecialTokens::count - 1);
    const auto s = static_cast<int32_t>(SpecialTokens::count + rng.integer(0, others - 1));
    c[static_cast<size_t>(k)] = s >= c[static_cast<size_t>(k)] ? s + 1 : s;  // uniform over the other symbols
    texts.push_back(w.input);
    texts.push_back(std::move(c));
  }
  const std::vector<int32_t> next = next_tokens(*loaded.model, texts);
  for (size_t i = 0; i < windows.size(); ++i) {
    if (next[2 * i] == next[2 * i + 1]) {
      ++in.skipped;
      continue;
    }
    in.clean.push_back({texts[2 * i], {next[2 * i]}});
    in.corrupt.push_back({texts[2 * i + 1], {next[2 * i + 1]}});
  }
}

}  // namespace

// Every refusal comes before predict's notes on stderr, so that a refused pair prints one line.
PatchInputs pair_from_texts(LoadedRun& loaded, const std::string& clean, const std::string& corrupt) {
  const Task& task = *loaded.task;
  PatchInputs in;
  in.format = batch_format(loaded.model->config(), task.language_model());
  Example c{ids_of(task, "--clean", clean), {}}, r{ids_of(task, "--corrupt", corrupt), {}};
  check_patching_lengths(c.input.size(), r.input.size());
  if (task.language_model()) {
    check_input(loaded, "--clean", clean, c.input.size());
    const std::vector<int32_t> next = next_tokens(*loaded.model, {c.input, r.input});
    c.output = {next[0]};
    r.output = {next[1]};
  } else {
    c.output = answer_of(task, "--clean", clean, c.input);
    r.output = answer_of(task, "--corrupt", corrupt, r.input);
  }
  in.pairs.push_back(patching_pair(in.format, c, r));  // ValueError: nothing to restore
  in.clean.push_back(std::move(c));
  in.corrupt.push_back(std::move(r));
  check_fits(loaded, in);
  check_input(loaded, "--clean", clean, in.clean[0].input.size());
  check_input(loaded, "--corrupt", corrupt, in.corrupt[0].input.size());
  return in;
}

PatchInputs pairs_from_corrupt_token(LoadedRun& loaded, int64_t k, int64_t count, uint64_t seed) {
  const Task& task = *loaded.task;
  PatchInputs in;
  in.format = batch_format(loaded.model->config(), task.language_model());
  in.corrupt_token = k;
  const std::vector<Example> heldout = heldout_inputs(loaded);
  if (heldout.empty()) throw ValueError("the run has no held-out inputs to corrupt: " + task.describe());
  std::vector<Example> inputs = inputs_with_position(heldout, k);
  Rng rng(seed);
  if (task.language_model()) {
    if (inputs.size() > static_cast<size_t>(count)) inputs.resize(static_cast<size_t>(count));
    language_model_pairs(loaded, inputs, k, rng, in);
  } else {
    for (const Example& e : inputs) {
      if (in.clean.size() == static_cast<size_t>(count)) break;
      std::optional<Example> x = corrupted(task, e, k, rng);
      if (!x) {
        ++in.skipped;
        continue;
      }
      in.clean.push_back(e);
      in.corrupt.push_back(std::move(*x));
    }
  }
  if (in.clean.empty())
    throw ValueError("--corrupt-token " + std::to_string(k) + ": no held-out input's answer changes with its symbol at position " +
                     std::to_string(k) + " (" + std::to_string(in.skipped) + " tried): nothing to restore");
  for (size_t i = 0; i < in.clean.size(); ++i) in.pairs.push_back(patching_pair(in.format, in.clean[i], in.corrupt[i]));
  check_fits(loaded, in);
  return in;
}

std::vector<Patch> all_patches(const TransformerConfig& config, const PatchInputs& in, bool per_position) {
  std::vector<Patch> out = residual_patches(config, in.format, in.pairs.front());
  for (bool each : {false, true}) {
    if (each && !per_position) break;
    const std::vector<Patch> heads = head_patches(config, in.format, in.pairs.front(), each);
    out.insert(out.end(), heads.begin(), heads.end());
  }
  return out;
}

}  // namespace attnlab::cli
