#!/usr/bin/env python3
"""attnlab ablate's logits against scripts/pytorch/torch_ablate.py's (PyTorch forward hooks), to 1e-5 (a ctest test;
needs torch, else skipped).

On a tiny trained run of every model kind (encoder, decoder, seq2seq, a text language model), for every mode (zero,
mean, resample) and a head, an MLP and a layer, then a group knocked out together (--together, JOINT): `attnlab
ablate --logits FILE` writes the set's batches, resample's donors and every pass's logits; PyTorch knocks out the
same component of the same checkpoint with hooks, and the logits at every real (unpadded) position must agree to
1e-5, the intact pass's too, and each knock-out must move them (by more than 1e-3) from the intact ones. 80
examples: two batches (attnlab scores 64 a batch).

    test_ablation_torch_parity.py --attnlab BUILD/attnlab
Exit 0: passed; 1: failed; 77: torch cannot be imported (ctest: skipped).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
import test_torch_loader as tl  # noqa: E402  (exits 77 when torch is missing)
import torch_ablate  # noqa: E402
from flags import without  # noqa: E402

TOLERANCE = 1e-5
SMALL = ["--d-model", "16", "--heads", "2", "--layers", "2", "--d-ff", "32", "--batch-size", "16", "--lr", "0.01",
         "--steps", "40", "--eval-every", "40", "--threads", "1", "--quiet"]
RUNS = [("encoder", ["--task", "reverse", "--model", "encoder", "--min-len", "3", "--max-len", "6"],
         ["blocks.1.attn.h0", "blocks.0.mlp", "blocks.1"]),
        ("decoder", ["--task", "reverse", "--model", "decoder", "--min-len", "3", "--max-len", "6"],
         ["blocks.0.attn.h1", "blocks.1.mlp", "blocks.0"]),
        ("seq2seq", ["--task", "reverse", "--model", "seq2seq", "--min-len", "3", "--max-len", "6"],
         ["decoder.blocks.0.cross_attn.h1", "encoder.blocks.1.attn.h0", "decoder.blocks.1.mlp", "encoder.blocks.0",
          "decoder.blocks.1"]),
        ("text", ["--task", "text", "--file", os.path.join(HERE, "..", "data", "text", "logbook.txt"), "--model", "decoder",
                  "--seq-len", "16"],
         ["blocks.1.attn.h1", "blocks.0.mlp", "blocks.1"]),
        # the papers' options: no norm, no biases, attention only (no --d-ff: no feed-forward), on repeat
        ("paper", ["--task", "repeat", "--model", "decoder", "--norm", "none", "--no-bias", "--attention-only",
                   "--vocab", "8", "--min-len", "3", "--max-len", "5"],
         ["blocks.1.attn.h0", "blocks.0"])]

# A group per kind, knocked out together (--together): heads of one attention, with an MLP or a layer.
JOINT = {"encoder": ["blocks.1.attn.h0", "blocks.1.attn.h1", "blocks.0.mlp"],
         "decoder": ["blocks.0.attn.h0", "blocks.0.attn.h1", "blocks.1"],
         "seq2seq": ["decoder.blocks.0.cross_attn.h1", "decoder.blocks.0.cross_attn.h0", "encoder.blocks.1.mlp"],
         "text": ["blocks.1.attn.h0", "blocks.1.attn.h1", "blocks.1"],
         "paper": ["blocks.0.attn.h0", "blocks.1.attn.h1"]}


def check(exe, work, name, flags, components):
    run = os.path.join(work, name)
    small = without(SMALL, "--d-ff") if "--attention-only" in flags else SMALL
    r = subprocess.run([exe, "train", "--run", run] + small + flags, capture_output=True, text=True)
    if r.returncode != 0:
        raise tl.Failed(f"attnlab train {name} exited {r.returncode}: {r.stderr.strip()}")
    joint = " + ".join(JOINT[name])
    for mode, names, together in [(m, c, t) for m in ("zero", "mean", "resample")
                                  for c, t in ((components, []), ([joint], ["--together"]))]:
        logits = os.path.join(work, f"{name}-{mode}.json")
        what = ",".join(names).replace(" + ", ",")
        r = subprocess.run([exe, "ablate", "--run", run, "--mode", mode, "--heldout", "80", "--what", what,
                            "--logits", logits, "--json", "--overwrite"] + together, capture_output=True, text=True)
        if r.returncode != 0:
            raise tl.Failed(f"attnlab ablate {name} --mode {mode} exited {r.returncode}: {r.stderr.strip()}")
        with open(logits) as f:
            passes = [p["component"] for p in json.load(f)["passes"]]
        if passes != ["intact"] + names:
            raise tl.Failed(f"{name} {mode}: --logits holds passes {passes}")
        worst = torch_ablate.compare(run, logits, names)
        for component, (diff, moved) in worst.items():
            print(f"{name:8s} {mode:8s} {component:32s} max |attnlab - torch| = {diff:.2e}, moved from intact {moved:.2e}")
            if not diff <= TOLERANCE:
                raise tl.Failed(f"{name} {mode} {component}: logits differ by {diff:.3g} > {TOLERANCE}")
            if component != "intact" and not moved > 1e-3:
                raise tl.Failed(f"{name} {mode} {component}: the knock-out moved no logit by more than {moved:.3g}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--attnlab", required=True)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="attnlab-ablation-parity-")
    try:
        for name, flags, components in RUNS:
            check(args.attnlab, work, name, flags, components)
    except tl.Failed as e:
        print("FAILED:", e)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("ablation parity: attnlab's ablated logits equal PyTorch's on every model kind and mode")
    return 0


if __name__ == "__main__":
    sys.exit(main())
