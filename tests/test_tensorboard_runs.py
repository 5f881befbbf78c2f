#!/usr/bin/env python3
"""Runs of `attnlab train --tensorboard` checked with TensorBoard's official definitions.

Every event file these runs write parses (scripts/checks/check_tfevents.py: framing,
masked CRC-32Cs, no field event.proto does not define) and every metrics.csv
value is a scalar of its column at its step:
  - an encoder run, a decoder run with --probe-every (whose instruments must
    also be there: grad_norm/PARAM and attention_entropy/LAYER/headH scalars
    equal to probe_params.csv's and probe_heads.csv's, a gradients/PARAM
    histogram per parameter and probed step);
  - a repeat run with --probe-induction (prefix_matching/LAYER/headH and
    previous_token/LAYER/headH equal to probe_induction.csv's) and a modular
    run (embedding_fourier/kK equal to embedding_fourier.csv's);
  - a run killed after its metrics rows of steps 15 and 20 but before their
    checkpoint (simulated by removing the step-20 checkpoint), resumed with
    --tensorboard: a second file starts with a SessionLog START at step 11,
    which makes TensorBoard drop the first attempt's values from step 11 on:
    resumed with --log-every 10, the row of step 15 is gone from metrics.csv
    and must not be shown; the redone row of step 20 (tokens_per_s and
    elapsed_s differ from the first attempt's) is metrics.csv's.

    test_tensorboard_runs.py --attnlab BUILD/attnlab
Exit 0: passed; 1: failed; 77: protoc or python3-protobuf missing (skipped).
"""
import argparse
import csv
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import check_tfevents as ct  # (PYTHONPATH: scripts/checks)
from flags import without

TINY = ["--vocab", "6", "--min-len", "4", "--max-len", "5", "--d-model", "16", "--heads", "2", "--layers", "1",
        "--d-ff", "32", "--batch-size", "16", "--heldout", "50", "--threads", "1", "--quiet"]


def train(attnlab, *args):
    r = subprocess.run([attnlab, "train", *args], capture_output=True, text=True)
    ct.require(r.returncode == 0, f"attnlab train {' '.join(args)} exited {r.returncode}: {r.stdout}{r.stderr}")


def event_values(run, event_class):
    return ct.shown_values(sorted(glob.glob(os.path.join(run, "events.out.tfevents.*"))), event_class)


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def check_probes(run, event_class):
    got = event_values(run, event_class)
    params = rows(os.path.join(run, "probe_params.csv"))
    ct.require(params, f"{run}: probe_params.csv has no rows")
    for r in params:
        step, name = int(r["step"]), r["param"]
        v = got.get((f"grad_norm/{name}", step))
        ct.require(v is not None and v.simple_value == ct.float32(float(r["grad_norm"])),
                   f"{run}: grad_norm/{name} at step {step}: {v} vs probe_params.csv {r['grad_norm']}")
        h = got.get((f"gradients/{name}", step))
        ct.require(h is not None and h.WhichOneof("value") == "histo", f"{run}: no histogram gradients/{name} at {step}")
        ct.require(h.histo.num > 0, f"{run}: gradients/{name} at step {step} is empty")
    for r in rows(os.path.join(run, "probe_heads.csv")):
        tag = f"attention_entropy/{r['layer']}/head{r['head']}"
        v = got.get((tag, int(r["step"])))
        ct.require(v is not None and v.simple_value == ct.float32(float(r["entropy"])),
                   f"{run}: {tag} at step {r['step']}: {v} vs probe_heads.csv {r['entropy']}")
    print(f"test_tensorboard_runs: {run}: {len(params)} probe_params.csv rows equal their scalars, histograms present")


def require_scalars(run, got, csv_name, tag_of, column):
    """Every row of the run's CSV `csv_name` is the scalar tag_of(row) at its step, as float32."""
    table = rows(os.path.join(run, csv_name))
    ct.require(table, f"{run}: {csv_name} has no rows")
    for r in table:
        tag, step = tag_of(r), int(r["step"])
        v = got.get((tag, step))
        ct.require(v is not None and v.simple_value == ct.float32(float(r[column])),
                   f"{run}: {tag} at step {step}: {v} vs {csv_name} {r[column]}")
    return len(table)


def check_mechanisms(attnlab, work, event_class):
    induction = os.path.join(work, "induction")
    train(attnlab, "--task", "repeat", "--model", "decoder", *without(TINY, "--layers"), "--layers", "2", "--steps", "8",
          "--log-every", "4", "--eval-every", "4", "--probe-induction", "4", "--tensorboard", "--run", induction)
    ct.check_run(induction, event_class)
    got = event_values(induction, event_class)
    n = require_scalars(induction, got, "probe_induction.csv",
                        lambda r: f"prefix_matching/{r['layer']}/head{r['head']}", "prefix_matching")
    require_scalars(induction, got, "probe_induction.csv",
                    lambda r: f"previous_token/{r['layer']}/head{r['head']}", "previous_token")
    modular = os.path.join(work, "modular")
    train(attnlab, "--task", "modular", "--modulus", "11", "--model", "decoder", "--layout", "bare",
          *without(TINY, "--vocab", "--min-len", "--max-len", "--heldout"),
          "--steps", "6", "--log-every", "3", "--eval-every", "3", "--tensorboard", "--run", modular)
    ct.check_run(modular, event_class)
    m = require_scalars(modular, event_values(modular, event_class), "embedding_fourier.csv",
                        lambda r: f"embedding_fourier/k{r['frequency']}", "norm")
    print(f"test_tensorboard_runs: {n} probe_induction.csv and {m} embedding_fourier.csv rows equal their scalars")


def killed_and_resumed(attnlab, work, event_class):
    run = os.path.join(work, "resumed")
    common = ["--task", "reverse", *TINY, "--log-every", "5", "--eval-every", "10", "--tensorboard"]
    train(attnlab, *common, "--steps", "20", "--run", run)
    for f in glob.glob(os.path.join(run, "checkpoints", "step-00000020*")):
        os.remove(f)  # as if killed after the rows of steps 15 and 20, before checkpoint 20
    # Rows every 10 steps now: the killed attempt's row of step 15 is not redone, only dropped.
    train(attnlab, "--resume", run, "--steps", "20", "--log-every", "10", "--tensorboard")
    files = sorted(glob.glob(os.path.join(run, "events.out.tfevents.*")))
    ct.require(len(files) == 2, f"{run}: {len(files)} event files after one resume, not 2")
    starts = [e.step for e in ct.parse_events(files[1], event_class) if e.WhichOneof("what") == "session_log"]
    ct.require(starts == [11], f"{run}: the resumed run's file has session starts at {starts}, not [11]")
    ct.check_run(run, event_class)  # also: no value of the killed attempt's rows past step 10 is shown


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnlab", required=True)
    attnlab = os.path.abspath(ap.parse_args().attnlab)
    work = tempfile.mkdtemp(prefix="attnlab-test-tensorboard-")
    try:
        event_class = ct.load_event_class(ct.DEFAULT_PROTOS, work)
        if event_class is None:
            return ct.SKIP
        encoder = os.path.join(work, "encoder")
        train(attnlab, "--task", "reverse", *TINY, "--steps", "20", "--log-every", "5", "--eval-every", "10",
              "--tensorboard", "--run", encoder)
        ct.check_run(encoder, event_class)
        noisy = os.path.join(work, "noisy")
        train(attnlab, "--task", "reverse", *TINY, "--steps", "10", "--log-every", "5", "--eval-every", "10",
              "--grad-accum", "2", "--noise-scale", "--tensorboard", "--run", noisy)
        ct.check_run(noisy, event_class)  # the noise_* columns' scalars too
        ct.require(rows(os.path.join(noisy, "metrics.csv"))[0]["noise_scale"] != "", f"{noisy}: no noise_scale")
        decoder = os.path.join(work, "decoder")
        train(attnlab, "--task", "copy", "--model", "decoder", *TINY, "--steps", "12", "--log-every", "3",
              "--eval-every", "6", "--probe-every", "5", "--tensorboard", "--run", decoder)
        ct.check_run(decoder, event_class)
        check_probes(decoder, event_class)
        check_mechanisms(attnlab, work, event_class)
        killed_and_resumed(attnlab, work, event_class)
        return 0
    except ct.CheckFailed as e:
        print(f"test_tensorboard_runs: FAILED: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
