"""The files of an attnlab run that the tools read, and their fields, declared once.

tests/test_run_schema.py checks these lists against what the C++ writes (cli/train_job.cpp,
training/metrics_log.cpp, a real run) and what the report reads (cli/report/*.js).
"""

SUMMARY = "summary.json"  # written when a run ends
METRICS = "metrics.csv"  # one row every --log-every steps, held-out columns filled at evaluations
CONFIG = "config.ini"  # the run's resolved settings
GIVEN_OPTIONS = "given_options.ini"  # config.ini's lines of the options the user gave (command line or --config)

# summary.json: the keys every finished run has, then those of some runs only.
SUMMARY_KEYS = ["task", "model", "parameters", "steps", "heldout_examples", "heldout_token_acc", "heldout_exact",
                "heldout_loss",
                "target", "target_patience", "solved_at_step", "target_first_reached_at_step", "seconds", "threads",
                "precision", "optimizer_state_bytes", "cpu"]
SUMMARY_KEYS_DISTRIBUTED = ["processes", "comm_bytes_per_step", "comm_bytes_received_per_step",
                            "comm_bytes_sent_per_step", "comm_seconds_per_step"]  # under mpirun -np N > 1
SUMMARY_KEYS_LANGUAGE_MODEL = ["heldout_bits_per_char", "heldout_chars"]  # --task text
SUMMARY_KEYS_TOKEN_MODEL = ["heldout_bits_per_token", "heldout_tokens"]  # --task repeat
SUMMARY_KEYS_IN_CONTEXT = ["heldout_in_context_loss", "heldout_late_token_acc"]  # language models (text, repeat)

# metrics.csv's columns, in order.
METRICS_COLUMNS = ["step", "loss", "lr", "grad_norm", "train_token_acc", "train_exact", "heldout_token_acc",
                   "heldout_exact", "tokens_per_s", "elapsed_s", "heldout_loss",
                   "noise_scale", "noise_trace", "noise_grad_sq",  # noise_*: train --noise-scale only
                   "weight_norm", "in_context_loss"]  # in_context_loss: language models only

# probe_sharpness.csv (train --probe-sharpness N, framework/probe/sharpness.h): a row per probed step and operator
# ("hessian"; with adam/adamw also "preconditioned"), threshold empty where none applies.
PROBE_SHARPNESS = "probe_sharpness.csv"
PROBE_SHARPNESS_COLUMNS = ["step", "operator", "lambda_max", "ritz_min", "residual", "iterations", "converged", "loss",
                           "lr", "threshold"]

# probe_induction.csv (train --probe-induction N, training/induction_probe.h): a row per probed step, self-attention
# layer ("blocks.0.attn") and head; both scores are attention weights averaged as the header documents, in [0, 1].
PROBE_INDUCTION = "probe_induction.csv"
PROBE_INDUCTION_COLUMNS = ["step", "layer", "head", "prefix_matching", "previous_token"]

# embedding_fourier.csv (every --task modular run, training/fourier_probe.h): at each evaluation's step a row per
# frequency k = 0 .. floor(p/2), the unnormalised norm of the residue rows' Fourier component k.
EMBEDDING_FOURIER = "embedding_fourier.csv"
EMBEDDING_FOURIER_COLUMNS = ["step", "frequency", "norm"]

# The outcome columns of scripts/tools/sweep.py's summary.csv, after "run" and the grid's settings.
SWEEP_OUTCOMES = ["heldout_exact", "heldout_token_acc", "solved_at_step", "steps", "seconds", "cpu_seconds", "exit"]

# The columns of a tool's summary.csv (scripts/tools/sweep.py, tune.py) that are outcomes of a point;
# every other column is a setting. attnlab report (cli/report/sweep.js, OUTCOMES) reads the same list.
OUTCOME_COLUMNS = ["run", "heldout_exact", "heldout_token_acc", "heldout_loss", "solved_at_step", "steps", "seconds",
                   "cpu_seconds", "exit", "objective", "state", "trial", "seeds", "spread"]


def solved_at(summary):
    """The step at which the run was solved (summary.json's solved_at_step), or None (-1: never)."""
    step = summary["solved_at_step"]
    return step if step > 0 else None
