#!/usr/bin/env python3
"""attnlab patch against scripts/pytorch/torch_patch.py (a ctest test; needs torch, else skipped).

Tiny runs of every model kind (encoder, decoder, seq2seq, a character language model; pre- and
post-LN, heads with projections and a parameter-free one) are trained here; for a clean and
corrupted pair of each, `attnlab patch --per-position --logits FILE` writes the logits of the
clean and corrupted runs and of every patch: the residual stream at every (point, position),
every head at all positions and every head at each position. PyTorch, patching with its own
forward hooks on the same checkpoint, must give every one of them to 1e-5, and the patches must
matter (some patched logits differ from the corrupted run's), so that a patch neither side
applied cannot pass.

Exit 0: passed; 1: failed; 77: torch cannot be imported (ctest: skipped).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from flags import without

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(os.path.dirname(HERE), "scripts", "pytorch", "torch_patch.py")
SKIP = 77

try:
    import torch  # noqa: F401
except ImportError:
    print("test_patching_torch_parity: SKIPPED: torch cannot be imported by", sys.executable)
    sys.exit(SKIP)

SMALL = ["--d-model", "16", "--layers", "2", "--d-ff", "32", "--steps", "150", "--batch-size", "16",
         "--lr", "0.01", "--threads", "1", "--quiet"]
TEXT = "the quick brown fox jumps over the lazy dog. " * 40

# name, train flags, clean input, corrupted inputs to try (the first whose answer differs is used)
RUNS = [
    ("encoder", ["--task", "reverse", "--model", "encoder", "--heads", "2", "--vocab", "6", "--min-len", "5", "--max-len", "5"],
     "3 1 4 1 5", ["3 1 2 1 5"]),
    ("decoder_post", ["--task", "reverse", "--model", "decoder", "--norm", "post", "--heads", "2", "--vocab", "6",
                      "--min-len", "3", "--max-len", "4"], "1 2 3 0", ["1 4 3 0"]),
    ("seq2seq_parameter_free", ["--task", "sort", "--model", "seq2seq", "--parameter-free-attention", "--positional",
                                "learned", "--vocab", "6", "--min-len", "3", "--max-len", "4"], "5 2 3", ["5 0 3"]),
    ("text_lm", ["--task", "text", "--model", "decoder", "--heads", "2", "--seq-len", "16"], "the quick brown ",
     ["the quick brow" + a + b for a in "nx " for b in " fo.xk"]),
    # the papers' options: no norm, no biases, attention only (so no --d-ff)
    ("decoder_paper", ["--task", "reverse", "--model", "decoder", "--norm", "none", "--no-bias", "--attention-only",
                       "--heads", "2", "--vocab", "6", "--min-len", "3", "--max-len", "4"], "1 2 3 0", ["1 4 3 0"]),
]


def attnlab(exe, *args, check=True):
    r = subprocess.run([exe, *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        sys.exit(f"attnlab {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return r


def patch_file(exe, run, clean, corrupts, out):
    """attnlab patch's --logits file for the first corrupted input whose answer differs from the clean one."""
    for corrupt in corrupts:
        r = attnlab(exe, "patch", "--run", run, "--clean", clean, "--corrupt", corrupt, "--per-position",
                    "--logits", out, check=False)
        if r.returncode == 0:
            return corrupt
        if "nothing to restore" not in r.stderr:
            sys.exit(f"attnlab patch --run {run} failed ({r.returncode}): {r.stderr}")
    sys.exit(f"{run}: no corrupted input of {corrupts} changes the answer")


def patches_matter(path):
    """Whether some patch moves some logit away from the corrupted run's."""
    with open(path) as f:
        data = json.load(f)
    corrupt = torch.tensor(data["corrupt_logits"])
    kinds = {"resid": False, "head": False}
    for p in data["patches"]:
        moved = bool((torch.tensor(p["logits"]) - corrupt).abs().max() > 1e-3)
        kinds["resid" if "resid_" in p["regions"][0]["point"] else "head"] |= moved
    return all(kinds.values())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnlab", required=True)
    args = ap.parse_args()
    failures = []
    with tempfile.TemporaryDirectory(prefix="attnlab-patch-parity-") as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "w") as f:
            f.write(TEXT)
        for name, flags, clean, corrupts in RUNS:
            run, out = os.path.join(tmp, name), os.path.join(tmp, name + ".json")
            files = ["--file", corpus] if "text" in flags else ["--heldout", "16"]
            small = without(SMALL, "--d-ff") if "--attention-only" in flags else SMALL
            attnlab(args.attnlab, "train", *flags, *files, *small, "--run", run)
            corrupt = patch_file(args.attnlab, run, clean, corrupts, out)
            r = subprocess.run([sys.executable, SCRIPT, run, out], capture_output=True, text=True)
            print(f"{name} ({clean!r} against {corrupt!r}): {r.stdout.strip()}{r.stderr.strip()}")
            if r.returncode != 0:
                failures.append(f"{name}: PyTorch's patched logits differ from attnlab's (exit {r.returncode})")
            if not patches_matter(out):
                failures.append(f"{name}: no residual or no head patch changes a logit; the test would not see one")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
