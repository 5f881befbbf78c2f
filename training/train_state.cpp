#include "training/train_state.h"

#include "training/distributed/shards.h"

namespace attnlab {

TrainState::TrainState(const TrainSettings& s) : TrainState(s, make_task(s.task)) {}

TrainState::TrainState(const TrainSettings& s, std::unique_ptr<Task> task)
    : settings_(s), task_(std::move(task)) {
  // Tasks read from files bring their own held-out split; make_heldout draws the others'.
  const bool own = task_->own_heldout() != nullptr;
  drawn_heldout_ = make_heldout(*task_, own ? 0 : s.heldout, derive_seed(s.seed, kHeldoutStream));
  batch_format_ = attnlab::batch_format(s.model, task_->language_model());
  stream_ = new_stream();
  if (s.train_size > 0) check_train_size(s, *task_);
  if (const std::vector<Example>* fixed = task_->own_train()) {  // modular: the task's own set
    const auto n = static_cast<int64_t>(fixed->size());
    train_set_ = std::make_unique<TrainSet>(*fixed, derive_seed(s.seed, kTrainOrderStream), s.batch_size < n);
  } else if (s.train_size > 0) {
    train_set_ = std::make_unique<TrainSet>(draw_distinct(*stream_, s.train_size, task_->name()),
                                            derive_seed(s.seed, kTrainOrderStream), s.batch_size < s.train_size);
  }
  model_ = make_model(s.model, derive_seed(s.seed, kInitStream));
  optimizer_ = make_optimizer(s.optim, model_->named_parameters());
  parameters_ = model_->parameters();
  set_communicator(single_process());
}

std::unique_ptr<TrainStream> TrainState::new_stream() const {
  return std::make_unique<TrainStream>(*task_, drawn_heldout_, derive_seed(settings_.seed, kTrainStream));
}

std::vector<Example> TrainState::first_batch() const {
  if (!train_set_) return new_stream()->next_batch(settings_.batch_size);
  TrainSet fresh(train_set_->examples(), derive_seed(settings_.seed, kTrainOrderStream), train_set_->shuffled());
  return fresh.next_batch(settings_.batch_size);  // with full batch: the whole set, in its order
}

void TrainState::set_communicator(const Communicator& c) {
  communicator_ = &c;
  std::vector<int64_t> sizes;
  for (const Var& p : parameters_) sizes.push_back(p.numel());
  shard_bounds_ = attnlab::shard_bounds(sizes, c.size());
  if (settings_.shard_optimizer && c.size() > 1) optimizer_->shard(owned_ranges(sizes, shard_bounds_, c.rank()));
}

ThreadSlices& TrainState::thread_slices() {
  if (!thread_slices_) thread_slices_ = std::make_unique<ThreadSlices>(*model_, settings_.threads);
  return *thread_slices_;
}

std::vector<Example> TrainState::next_batch() {
  return train_set_ ? train_set_->next_batch(settings_.batch_size) : stream_->next_batch(settings_.batch_size);
}

std::string TrainState::data_state() const { return train_set_ ? train_set_->state() : stream_->state(); }

void TrainState::set_data_state(const std::string& s) {
  if (train_set_) train_set_->set_state(s);
  else stream_->set_state(s);
}

const std::vector<Example>& TrainState::heldout() const {
  const std::vector<Example>* own = task_->own_heldout();
  return own ? *own : drawn_heldout_.examples();
}

bool TrainState::record_target(int64_t step, bool reached) {
  if (!reached) {
    target_streak_start = -1;
    target_streak = 0;
    return false;
  }
  if (target_first_reached_at < 0) target_first_reached_at = step;
  if (target_streak++ == 0) target_streak_start = step;
  if (solved_at >= 0 || target_streak < settings_.target_patience) return false;
  solved_at = target_streak_start;
  return true;
}

}  // namespace attnlab
