#!/usr/bin/env python3
"""attnlab predict --json against scripts/pytorch/attnlab_torch.py, at full precision (a ctest test; needs torch, else skipped).

For runs whose symbols only the checkpoint's "vocabulary" metadata holds (pairs
of words with a decoder, pairs of characters with seq2seq) and two generated
tasks (a gelu encoder, an add decoder), on 20 inputs each:
  - attnlab_torch.predict(RUN, X) equals the first line `attnlab predict` prints
    and the "answer" text of `attnlab predict --json`, whose ids it decodes to;
  - every probability of every decoded position in --json (float32, shortest
    round-trip form) equals the loader's float64 softmax to 1e-5.

    test_torch_json.py --attnlab BUILD/attnlab
Exit 0: passed; 1: failed; 77: torch cannot be imported (ctest: skipped).
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
import test_torch_loader as tl  # noqa: E402  (exits 77 when torch is missing)

attnlab_torch, ref, torch = tl.attnlab_torch, tl.ref, tl.torch
SMALL = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--batch-size", "16", "--lr", "0.01",
         "--steps", "60", "--eval-every", "60", "--threads", "1", "--quiet"]
WORDS = ["red", "green", "blue", "cyan", "gray", "pink", "teal", "lime", "navy", "plum", "rose", "sand"]


def write_pairs(work):
    words = os.path.join(work, "words.tsv")
    with open(words, "w") as f:
        for w in WORDS:
            f.write(f"{w} one\tone {w} {w}\n{w} two\ttwo {w}\n")
    chars = os.path.join(work, "chars.tsv")
    rng = random.Random(3)
    with open(chars, "w") as f:
        for _ in range(40):
            s = "".join(rng.choice("abcde ") for _ in range(rng.randint(2, 5)))
            f.write(f"{s}\t{s[::-1]}\n")
    return words, chars


def inputs_for(name, rng, files):
    if name.startswith("pairs_words"):
        return [f"{rng.choice(WORDS)} {rng.choice(['one', 'two'])}" for _ in range(20)]
    if name.startswith("pairs_chars"):
        with open(files[1]) as f:
            lines = [line.split("\t")[0] for line in f.read().splitlines()]
        return [rng.choice(lines) for _ in range(20)]
    return tl.random_inputs(("add", 2, None) if "add" in name else ("numbered", 6, 5), rng, 20)


def attnlab_json(exe, run, text):
    r = subprocess.run([exe, "predict", "--run", run, "--json", text], capture_output=True, text=True)
    if r.returncode != 0:
        raise tl.Failed(f"attnlab predict --json --run {run} {text!r} exited {r.returncode}: {r.stderr.strip()}")
    plain = subprocess.run([exe, "predict", "--run", run, text], capture_output=True, text=True)
    return json.loads(r.stdout), plain.stdout.split("\n")[0]


def loader_probabilities(model, task, source, answer):
    batch = tl.teacher_forced_batch(model, task, source, answer)
    inputs = {k: torch.tensor(v, dtype=torch.long) for k, v in batch.items() if k != "targets"}
    with torch.no_grad():
        probs = torch.softmax(model(inputs), dim=-1)[0]
    return [probs[t].tolist() for t, y in enumerate(batch["targets"][0]) if y != ref.IGNORE]


def check_run(exe, work, name, flags, files, rng):
    run = os.path.join(work, name)
    r = subprocess.run([exe, "train", "--run", run] + SMALL + flags, capture_output=True, text=True)
    if r.returncode != 0:
        raise tl.Failed(f"attnlab train {name} exited {r.returncode}: {r.stderr.strip()}")
    model = attnlab_torch.load(run)
    task = attnlab_torch.TaskText(attnlab_torch.read_config_ini(run), model.attnlab_config["arch"],
                                  model.attnlab_metadata)
    worst, answers = 0.0, set()
    for text in inputs_for(name, rng, files):
        j, line = attnlab_json(exe, run, text)
        got = attnlab_torch.predict(run, text)
        if not got == line == j["answer"]["text"]:
            raise tl.Failed(f"{name}: {text!r}: attnlab predicts {line!r} (--json {j['answer']['text']!r}), "
                            f"attnlab_torch {got!r}")
        want = [p["probabilities"] for p in j["positions"]]
        have = loader_probabilities(model, task, j["input"]["ids"], j["answer"]["ids"])
        if len(want) != len(have):
            raise tl.Failed(f"{name}: {text!r}: {len(want)} positions in --json, the loader has {len(have)}")
        for k, (w, h) in enumerate(zip(want, have)):
            diff = max(abs(a - b) for a, b in zip(w, h))
            if len(w) != len(h) or diff > 1e-5:
                raise tl.Failed(f"{name}: {text!r} position {k}: probabilities differ by {diff:.2e} (V {len(w)} vs {len(h)})")
            worst = max(worst, diff)
        answers.add(got)
    print(f"  {name}: 20 inputs, answers equal ({len(answers)} distinct), probabilities to {worst:.1e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attnlab", required=True)
    exe = os.path.abspath(ap.parse_args().attnlab)
    work = tempfile.mkdtemp(prefix="attnlab-test-torch-json-")
    rng = random.Random(29)
    try:
        files = write_pairs(work)
        runs = [
            ("pairs_words_decoder", ["--task", "pairs", "--file", files[0], "--model", "decoder"]),
            ("pairs_chars_seq2seq", ["--task", "pairs", "--file", files[1], "--tokenize", "chars", "--model", "seq2seq"]),
            ("reverse_encoder_gelu", ["--task", "reverse", "--vocab", "6", "--min-len", "2", "--max-len", "5",
                                      "--activation", "gelu", "--heldout", "16"]),
            ("add_decoder", ["--task", "add", "--digits", "2", "--model", "decoder", "--heldout", "16"]),
        ]
        for name, flags in runs:
            check_run(exe, work, name, flags, files, rng)
    except (tl.Failed, attnlab_torch.LoadError) as e:
        print(f"test_torch_json: FAILED: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("test_torch_json: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
