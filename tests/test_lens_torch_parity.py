#!/usr/bin/env python3
"""attnlab lens against scripts/pytorch/torch_lens.py (a ctest test; needs torch, else skipped).

Trains tiny runs of every model kind (encoder, decoder, seq2seq, a text language model; pre-LN,
post-LN and norm-free, tied embeddings, parameter-free attention, attention-only blocks, no biases),
then for a few inputs each runs
`attnlab lens --json --logits FILE` and computes the lens and the attribution of the same ids
with PyTorch forward hooks on the checkpoint loaded by attnlab_torch: the lens's logits at every
point and position, the probabilities and ranks attnlab reports, and every part of the
attribution must agree to 1e-5 (a post-LN run: no attribution on either side).

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
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts", "pytorch"))
SKIP = 77
LIMIT = 1e-5

try:
    import torch
except ImportError:
    print("test_lens_torch_parity: SKIPPED: torch cannot be imported by", sys.executable)
    sys.exit(SKIP)
import attnlab_torch  # noqa: E402
import torch_lens  # noqa: E402
from attnlab_runs import safetensors  # noqa: E402

TINY = ["--d-model", "16", "--layers", "2", "--d-ff", "32", "--steps", "60", "--eval-every", "60",
        "--quiet", "--threads", "1"]
SYMBOLS = ["--vocab", "6", "--min-len", "3", "--max-len", "5"]
TEXT = os.path.join(ROOT, "data", "text", "logbook.txt")
# name, train flags, inputs
RUNS = [
    ("encoder", ["--task", "reverse"] + SYMBOLS, ["3 1 2 0", "5 5 4"]),
    ("decoder_tied_rope", ["--task", "sort", "--model", "decoder", "--tie-embeddings", "--positional", "rope"] + SYMBOLS,
     ["3 1 2 0", "4 0 1 1 2"]),
    ("seq2seq_learned", ["--task", "reverse", "--model", "seq2seq", "--positional", "learned"] + SYMBOLS,
     ["3 1 2", "0 1 2 3 4"]),
    ("text_lm", ["--task", "text", "--file", TEXT, "--model", "decoder", "--seq-len", "16"], ["the ship", "the log book"]),
    ("encoder_parameter_free", ["--task", "copy", "--parameter-free-attention"] + SYMBOLS, ["3 1 2"]),
    ("decoder_post_ln", ["--task", "copy", "--model", "decoder", "--norm", "post"] + SYMBOLS, ["3 1 2"]),
    # No norm: attribution through the head alone; attention-only: no MLP parts; no bias: no out_proj.bias parts.
    ("decoder_norm_none_attention_only_no_bias", ["--task", "copy", "--model", "decoder", "--norm", "none",
                                                  "--attention-only", "--no-bias"] + SYMBOLS, ["3 1 2"]),
    ("seq2seq_norm_none_tied", ["--task", "reverse", "--model", "seq2seq", "--norm", "none", "--tie-embeddings"]
     + SYMBOLS, ["3 1 2"]),
]


class Failed(Exception):
    pass


def attnlab_lens(exe, work, run, text):
    file = os.path.join(work, "lens.safetensors")
    r = subprocess.run([exe, "lens", "--run", run, text, "--json", "--logits", file], capture_output=True, text=True)
    if r.returncode != 0:
        raise Failed(f"attnlab lens --run {run} {text!r} exited {r.returncode}: {r.stderr.strip()}")
    arrays, _, _ = safetensors.read(file)
    return json.loads(r.stdout), torch.from_numpy(arrays["lens"].copy()).double()


def worst(a, b, what):
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    if a.shape != b.shape:
        raise Failed(f"{what}: attnlab's shape {list(a.shape)}, PyTorch's {list(b.shape)}")
    return (a - b).abs().max().item()


def check_lens_cells(e, probs, what):
    """attnlab's reported top token, probabilities and ranks against PyTorch's probabilities (P, T, V)."""
    err = 0.0
    for p, row in enumerate(e["lens"]):
        for t, c in enumerate(row):
            dist = probs[p, t]
            err = max(err, abs(c["p_top"] - dist.max().item()), abs(dist[c["top_id"]].item() - dist.max().item()))
            y = e["ids"]["targets"][t]
            if c["rank"] is None:
                continue
            err = max(err, abs(c["p_answer"] - dist[y].item()))
            rank = 1 + int((dist > dist[y] + LIMIT).sum())  # ties within the limit may fall either way
            if not rank <= c["rank"] <= 1 + int((dist > dist[y] - LIMIT).sum()):
                raise Failed(f"{what} point {p} position {t}: attnlab ranks the answer {c['rank']}, PyTorch {rank}")
    return err


def check_input(exe, work, model, name, run, text):
    e, logits = attnlab_lens(exe, work, run, text)
    ids = e["ids"]
    inputs = {}
    if ids["src"] is not None:
        inputs.update(src=[ids["src"]], src_pad=None)
    if ids["tgt_in"] is not None:
        inputs.update(tgt_in=[ids["tgt_in"]], tgt_pad=None)
    points, torch_logits, parts = torch_lens.lens(model, inputs, [ids["targets"]])
    what = f"{name} {text!r}"
    if points != e["points"]:
        raise Failed(f"{what}: attnlab decodes {e['points']}, PyTorch {points}")
    err = worst(logits, torch_logits, what + " lens logits")
    err = max(err, check_lens_cells(e, torch.softmax(torch_logits[:, 0], -1), what))
    if (parts is None) != (e["attribution"] is None):
        raise Failed(f"{what}: attribution {'absent' if e['attribution'] is None else 'present'} in attnlab, not in PyTorch")
    for a, want in zip(e["attribution"] or [], parts or []):
        if [p["component"] for p in a["parts"]] != [n for n, _ in want]:
            raise Failed(f"{what}: attnlab's parts {[p['component'] for p in a['parts']]}, PyTorch's {[n for n, _ in want]}")
        err = max(err, worst([p["logit"] for p in a["parts"]], [v for _, v in want], what + " attribution"))
    if len(e["attribution"] or []) != len(parts or []):
        raise Failed(f"{what}: {len(e['attribution'] or [])} answer positions attributed, PyTorch {len(parts or [])}")
    if not err <= LIMIT:
        raise Failed(f"{what}: attnlab and PyTorch differ by {err:.3g} (limit {LIMIT})")
    return err


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attnlab", required=True, help="the attnlab executable")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="attnlab-test-lens-parity-")
    try:
        for name, flags, texts in RUNS:
            run = os.path.join(work, name)
            heads = [] if "--parameter-free-attention" in flags else ["--heads", "2"]
            tiny = TINY if "--attention-only" not in flags else [f for f in TINY if f not in ("--d-ff", "32")]
            r = subprocess.run([args.attnlab, "train", "--run", run] + tiny + heads + flags, capture_output=True, text=True)
            if r.returncode != 0:
                raise Failed(f"attnlab train {name} exited {r.returncode}: {r.stderr.strip()}")
            model = attnlab_torch.load(run)
            err = max(check_input(args.attnlab, work, model, name, run, text) for text in texts)
            print(f"  {name}: {len(texts)} inputs, lens and attribution equal PyTorch's to {err:.1e}")
    except (Failed, attnlab_torch.LoadError) as e:
        print(f"test_lens_torch_parity: FAILED: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("test_lens_torch_parity: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
