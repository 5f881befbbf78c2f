#pragma once
// Loading a trained run for eval, predict and the instruments.
#include <memory>
#include <string>
#include <vector>

#include "cli/run_settings.h"
#include "training/evaluate.h"
#include "datasets/task.h"
#include "models/sequence_model.h"

namespace attnlab::cli {

struct LoadedRun {
  TrainSettings settings;
  std::unique_ptr<Task> task;
  std::unique_ptr<SequenceModel> model;
  int64_t step = 0;
};

// The run's settings, task and model with the weights of checkpoint `step`
// (the latest when step <= 0). IoError for a missing or foreign directory, an
// unreadable checkpoint, or a config.ini edited since the checkpoint
// (check_checkpoint_options). A run training meanwhile removes its older
// checkpoints (--keep): when the latest one goes before it is read, the
// newest is chosen again, a bounded number of times.
LoadedRun load_run(const RunDir& run, int64_t step = 0);

// The model file's metadata key that holds the options a checkpoint was
// trained with, as config.ini writes them.
inline constexpr const char* kCheckpointOptionsKey = "train_options";

// IoError unless `options` (config.ini's text, or a resumed run's resolved
// options) gives every option that --resume may not change as checkpoint
// `step` of `run` recorded it (kCheckpointOptionsKey), naming the option and
// both values: an edited task, length, seed or held-out size would otherwise
// be trained on (resume) or evaluated on another held-out set (eval, predict,
// attention, report). A checkpoint without the record is not checked; an
// option missing from the record counts as its default (it was added since).
void check_checkpoint_options(const RunDir& run, const std::string& options, int64_t step);

// IoError unless `config` (the model config.ini describes) is the one the
// checkpoint `stem` was trained with (its "model_config" metadata), naming
// the first field that differs and both values: an edited config.ini would
// otherwise load weights into another model (heads: same shapes, other
// answers). eval, predict, attention, sample (load_run) and resume call it
// before loading the weights; a checkpoint without a model_config (not
// written by train) is not checked.
void check_checkpoint_config(const TransformerConfig& config, const std::string& stem);

// IoError unless the task maps every id to the token the checkpoint `stem`
// was trained with (its "vocabulary" metadata, training/checkpoints.h),
// naming the first id that differs: an edited vocab.txt would otherwise read
// and write other words with the same weights. load_run calls it; a
// checkpoint without that key (written before it existed) is not checked.
void check_checkpoint_vocabulary(const Task& task, const std::string& stem);

// DIR/vocab.txt: the vocabulary of a task read from a file (pairs, text),
// written by train and used by every later command, so that text maps to the
// same ids even if the file changes (see datasets/token_table.h).
std::string run_vocab_path(const RunDir& run);

// An input sequence for the run's model, written as its task writes it
// (predict, attention). ValueError for an empty input, a special token, or an
// input longer than the model's positional table.
std::vector<int32_t> parse_input(const LoadedRun& run, const std::string& text);

// Why the model may get `input` wrong: it is not of the shape it was trained
// on (a length outside --min-len..--max-len, an add input not of --digits
// digits); "" when it is. parse_input prints it on stderr as a note; the
// report shows it beside the --input's answer.
std::string input_shape_note(const LoadedRun& run, const std::vector<int32_t>& input);

// The note on stderr for an answer that filled the positional table
// (answer_filled_table in training/evaluate.h): predict, attention; its
// text, which the report shows too.
void note_answer_filled_table(const TransformerConfig& config);
std::string answer_filled_table_note(const TransformerConfig& config);
// The note for an answer cut by its budget (answer_spent_budget): no <eos>
// after the expected answer's budget - 1 tokens; its text.
void note_answer_spent_budget(int64_t budget);
std::string answer_spent_budget_note(int64_t budget);

}  // namespace attnlab::cli
