#!/usr/bin/env python3
"""scripts/pytorch/attnlab_torch.py against attnlab itself (a ctest test; needs torch, else skipped).

1. Runs trained here with the given attnlab, one per model kind and option mix:
   `attnlab predict --run R --logits --top V X` against the loader on 20 random
   inputs each: the answer line must be equal, and every probability attnlab
   prints (3 decimals) must be the loader's, rounded. On 5 of them, every
   attention weight `attnlab attention` writes (full float32 precision) must be
   the loader's to 1e-5, layer by layer and head by head: the model's insides
   in full precision, on the real checkpoint.
2. The parity fixtures tests/data/model_*.json (whose logits attnlab's forward
   matches, tests/test_parity.cpp): their weights written as an attnlab model file
   with the fixture's model_config, loaded with attnlab_torch.load, must give the
   fixture's logits to 1e-5 on its padded batch.

Exit 0: passed; 1: failed; 77: torch cannot be imported (ctest: skipped).
"""
import argparse
import contextlib
import io
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SKIP = 77

try:
    import torch
except ImportError:
    print("test_torch_loader: SKIPPED: torch cannot be imported by", sys.executable)
    sys.exit(SKIP)
import attnlab_torch  # noqa: E402
from flags import without  # noqa: E402
import torch_reference as ref  # noqa: E402

SMALL = ["--d-model", "16", "--layers", "2", "--d-ff", "32", "--batch-size", "16",
         "--lr", "0.01", "--heldout", "16", "--threads", "1", "--quiet"]

# name, train flags, the input generator's (kind, longest input)
RUNS = [
    ("encoder_gelu_scale_none", ["--task", "reverse", "--model", "encoder", "--activation", "gelu",
                                 "--attn-scale", "none", "--vocab", "6", "--min-len", "3", "--max-len", "5"],
     ("numbered", 6, 7)),
    ("decoder_short_table", ["--task", "reverse", "--model", "decoder", "--vocab", "6", "--min-len", "2",
                             "--max-len", "4", "--positions", "10"],
     ("numbered", 6, 8)),  # inputs up to 8 + [bos] [sep]: answers reach the end of the table
    # One step: near its initial weights it seldom says <eos>, so its answers run to the end of the table.
    ("decoder_untrained_fills_table", ["--task", "reverse", "--model", "decoder", "--vocab", "6", "--min-len", "2",
                                       "--max-len", "4", "--positions", "10", "--steps", "1", "--eval-every", "1"],
     ("numbered", 6, 8)),
    ("seq2seq_rope_dk_dv_linear", ["--task", "sort", "--model", "seq2seq", "--positional", "rope", "--d-k", "4",
                                   "--d-v", "6", "--attn-scale", "linear", "--vocab", "6", "--min-len", "2",
                                   "--max-len", "5", "--positions", "8"], ("numbered", 6, 8)),
    ("decoder_post_tied_learned", ["--task", "copy", "--model", "decoder", "--norm", "post", "--tie-embeddings",
                                   "--positional", "learned", "--vocab", "5", "--min-len", "2", "--max-len", "4",
                                   "--positions", "12", "--steps", "150"], ("numbered", 5, 6)),
    ("encoder_add_parameter_free_rope", ["--task", "add", "--digits", "2", "--model", "encoder",
                                         "--parameter-free-attention", "--positional", "rope", "--attn-scale", "0.5"],
     ("add", 2, None)),
    # Randomised positions: a forward spreads them over each sequence, a decoding over its plan.
    ("decoder_random_positions_learned", ["--task", "reverse", "--model", "decoder", "--positional", "learned",
                                          "--vocab", "6", "--min-len", "2", "--max-len", "4",
                                          "--random-positions", "16"], ("numbered", 6, 6)),
    ("seq2seq_random_positions_sinusoidal", ["--task", "copy", "--model", "seq2seq", "--vocab", "6",
                                             "--min-len", "2", "--max-len", "4", "--random-positions", "12"],
     ("numbered", 6, 6)),
    ("seq2seq_post_parameter_free_learned", ["--task", "reverse", "--model", "seq2seq", "--norm", "post",
                                             "--parameter-free-attention", "--positional", "learned",
                                             "--vocab", "6", "--min-len", "2", "--max-len", "4"], ("numbered", 6, 6)),
    # The papers' options: no LayerNorm (Nanda et al.), attention-only blocks (Olsson et al.), no biases.
    ("decoder_norm_none_attention_only_no_bias", ["--task", "reverse", "--model", "decoder", "--norm", "none",
                                                  "--attention-only", "--no-bias", "--vocab", "6", "--min-len", "2",
                                                  "--max-len", "4"], ("numbered", 6, 6)),
    ("seq2seq_norm_none_no_bias_tied", ["--task", "copy", "--model", "seq2seq", "--norm", "none", "--no-bias",
                                        "--tie-embeddings", "--vocab", "6", "--min-len", "2", "--max-len", "4"],
     ("numbered", 6, 6)),
    ("encoder_post_attention_only", ["--task", "reverse", "--model", "encoder", "--norm", "post", "--attention-only",
                                     "--vocab", "6", "--min-len", "3", "--max-len", "5"], ("numbered", 6, 7)),
    # bare with inputs longer than trained: answers cut by the end of the table
    ("decoder_bare_short_table", ["--task", "reverse", "--model", "decoder", "--layout", "bare", "--vocab", "6",
                                  "--min-len", "2", "--max-len", "3", "--positions", "8"], ("numbered", 6, 6)),
    # duplicate: the answer is twice the input's length
    ("decoder_duplicate", ["--task", "duplicate", "--model", "decoder", "--vocab", "6", "--min-len", "2",
                           "--max-len", "3"], ("numbered", 6, 3)),
    # The grokking model: --layout bare (input then answer, no specials, no <eos>) on modular arithmetic, at
    # Nanda et al.'s kind of initialisation (gpt2 at a set scale, learned positions).
    ("decoder_bare_modular", ["--task", "modular", "--modulus", "11", "--model", "decoder", "--layout", "bare",
                              "--norm", "none", "--no-bias", "--init", "gpt2", "--init-std", "0.25", "--positional",
                              "learned", "--positions", "5", "--steps", "150"], ("modular", 11)),
]


class Failed(Exception):
    pass


def random_inputs(gen, rng, n):
    kind = gen[0]
    out = []
    while len(out) < n:
        if kind == "modular":
            out.append(f"{rng.randrange(gen[1])} + {rng.randrange(gen[1])} =")
        elif kind == "add":
            digits = gen[1]
            a = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, digits)))
            b = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, digits)))
            out.append(f"{a}+{b}")
        else:
            _, vocab, longest = gen
            out.append(" ".join(str(rng.randrange(vocab)) for _ in range(rng.randint(1, longest))))
    return out


NOTES = ("note: the answer reached", "note: no <eos>")  # the decoding's notes, which the loader prints too


def decoding_notes(stderr):
    return [line for line in stderr.splitlines() if line.startswith(NOTES)]


def attnlab_predict(exe, run, text, vocab_size):
    """(answer line, [{token: probability}] per position, the decoding's notes) as attnlab predict --logits
    prints them."""
    r = subprocess.run([exe, "predict", "--run", run, "--logits", "--top", str(vocab_size), text],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise Failed(f"attnlab predict --run {run} {text!r} exited {r.returncode}: {r.stderr.strip()}")
    lines = r.stdout.split("\n")
    positions = []
    for line in lines[2:]:
        if not line.startswith("  position "):
            continue
        fields = line.split(":", 1)[1].split()
        positions.append({fields[i]: float(fields[i + 1]) for i in range(0, len(fields), 2)})
    return lines[0], positions, decoding_notes(r.stderr)


def teacher_forced_batch(model, task, source, answer):
    """What predict --logits runs the model on (training/evaluate.cpp's teacher_forced_batch)."""
    return attnlab_torch.teacher_forced_batch(model.attnlab_config, source, answer, task.decoding_budget(source))


def loader_probabilities(model, task, source, answer):
    batch = teacher_forced_batch(model, task, source, answer)
    inputs = {k: torch.tensor(v, dtype=torch.long) for k, v in batch.items() if k != "targets"}
    with torch.no_grad():
        probs = torch.softmax(model(inputs), dim=-1)[0]
    return [{task.tokens[i]: p for i, p in enumerate(probs[t].tolist())}
            for t, y in enumerate(batch["targets"][0]) if y != ref.IGNORE]


def recorded_attention(model, inputs):
    """{module name: weights (h, T_q, T_k)} from the loader's own forward: torch.softmax
    is watched while each attention module runs (the reference computes its weights with it)."""
    names = {m: n for n, m in model.named_modules() if isinstance(m, ref.MultiHeadAttention)}
    running, maps = [], {}
    real_softmax = torch.softmax

    def watching_softmax(x, *args, **kwargs):
        out = real_softmax(x, *args, **kwargs)
        if running:
            maps[running[-1]] = out[0]
        return out

    def enter(module, _):
        running.append(names[module])

    def leave(module, _, __):  # returns None: the output stays as it is
        running.pop()

    hooks = [m.register_forward_pre_hook(enter) for m in names] + [m.register_forward_hook(leave) for m in names]
    torch.softmax = watching_softmax
    try:
        with torch.no_grad():
            model(inputs)
    finally:
        torch.softmax = real_softmax
        for h in hooks:
            h.remove()
    return maps


def check_attention(exe, work, run, model, task, text):
    out = os.path.join(work, "attention")
    r = subprocess.run([exe, "attention", "--run", run, "--out", out, text], capture_output=True, text=True)
    if r.returncode != 0:
        raise Failed(f"attnlab attention --run {run} {text!r} exited {r.returncode}: {r.stderr.strip()}")
    with open(os.path.join(out, "attention.json")) as f:
        layers = json.load(f)["layers"]
    ids = {layer["name"]: [[task.ids[t] for t in layer["queries"]]] for layer in layers}
    arch = model.attnlab_config["arch"]
    first = layers[0]["name"]
    source = task.from_text(text)
    budget = task.decoding_budget(source)
    table = attnlab_torch.decoding_positions(model.attnlab_config,
                                             len(attnlab_torch.decoding_prompt(model.attnlab_config, source))
                                             if arch == "decoder" else 1, budget - 1)
    if arch == "encoder":
        inputs = {"src": ids[first], "src_pad": None}
    elif arch == "decoder":
        inputs = {"tgt_in": ids[first], "tgt_pad": None, "tgt_pos": [table[:len(ids[first][0])]]}
    else:
        self_attn = next(n for n in ids if n.startswith("decoder.") and n.endswith(".self_attn"))
        inputs = {"src": ids[first], "src_pad": None, "tgt_in": ids[self_attn], "tgt_pad": None,
                  "tgt_pos": [table[:len(ids[self_attn][0])]]}
    maps = recorded_attention(model, {k: v and torch.tensor(v, dtype=torch.long) for k, v in inputs.items()})
    if sorted(maps) != sorted(layer["name"] for layer in layers):
        raise Failed(f"{run}: attnlab writes layers {[l['name'] for l in layers]}, the loader has {sorted(maps)}")
    worst = 0.0
    for layer in layers:
        for h, file in enumerate(layer["files"]):
            with open(os.path.join(out, file)) as f:
                want = torch.tensor([[float(x) for x in line.split(",")] for line in f.read().split()],
                                    dtype=torch.float64)
            got = maps[layer["name"]][h]
            if got.shape != want.shape:
                raise Failed(f"{run} {text!r}: {file} is {list(want.shape)}, the loader's {list(got.shape)}")
            worst = max(worst, (got - want).abs().max().item())
    if not worst <= 1e-5:
        raise Failed(f"{run} {text!r}: attention weights differ from attnlab's by {worst:.3g} (limit 1e-5)")
    shutil.rmtree(out)
    return worst


def check_run(exe, work, name, flags, gen, rng):
    run = os.path.join(work, name)
    heads = [] if "--parameter-free-attention" in flags else ["--heads", "2"]
    steps = [] if "--steps" in flags else ["--steps", "40", "--eval-every", "40"]
    # no feed-forward without --d-ff; modular holds out every pair it does not train on
    small = without(SMALL, *["--d-ff"] * ("--attention-only" in flags), *["--heldout"] * ("modular" in flags))
    r = subprocess.run([exe, "train", "--run", run] + small + heads + steps + flags, capture_output=True, text=True)
    if r.returncode != 0:
        raise Failed(f"attnlab train {name} exited {r.returncode}: {r.stderr.strip()}")
    model = attnlab_torch.load(run)
    task = attnlab_torch.TaskText(attnlab_torch.read_config_ini(run), model.attnlab_config["arch"],
                                  model.attnlab_metadata)
    answers, worst, notes = set(), 0.0, 0
    for n, text in enumerate(random_inputs(gen, rng, 20)):
        if n < 5:
            worst = max(worst, check_attention(exe, work, run, model, task, text))
        want, want_probs, want_notes = attnlab_predict(exe, run, text, model.attnlab_config["vocab_size"])
        with contextlib.redirect_stderr(io.StringIO()) as err:
            got = attnlab_torch.predict(run, text)
        if got != want:
            raise Failed(f"{name}: {text!r}: attnlab predicts {want!r}, attnlab_torch {got!r}")
        if decoding_notes(err.getvalue()) != want_notes:
            raise Failed(f"{name}: {text!r}: attnlab notes {want_notes}, attnlab_torch {decoding_notes(err.getvalue())}")
        notes += len(want_notes)
        source = task.from_text(text)
        got_probs = loader_probabilities(model, task, source, task.from_text(got))
        if len(got_probs) != len(want_probs):
            raise Failed(f"{name}: {text!r}: {len(want_probs)} positions printed, the loader has {len(got_probs)}")
        for k, (w, g) in enumerate(zip(want_probs, got_probs)):
            for token, p in w.items():
                if abs(p - g[token]) > 0.0005 + 1e-9:  # printed with 3 decimals
                    raise Failed(f"{name}: {text!r} position {k}: attnlab prints p({token}) = {p:.3f}, "
                                 f"the loader gives {g[token]:.6f}")
        answers.add(want)
    print(f"  {name}: 20 inputs, answers, probabilities and {notes} decoding notes equal ({len(answers)} distinct "
          f"answers); attention weights to {worst:.1e}")
    return len(answers)


def write_model_file(path, cfg, weights):
    """An attnlab model file (safetensors, float32) with the fixture's weights and config."""
    header = {"__metadata__": {"format": "attnlab-checkpoint", "kind": "model",
                               "model_config": json.dumps(cfg, sort_keys=True)}}
    data = b""
    for name, t in weights.items():
        raw = struct.pack(f"<{len(t['values'])}f", *t["values"])
        header[name] = {"dtype": "F32", "shape": t["shape"], "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def check_fixture(work, path):
    with open(path) as f:
        fx = json.load(f)
    file = os.path.join(work, os.path.basename(path).replace(".json", ".safetensors"))
    write_model_file(file, fx["config"], fx["weights"])
    model = attnlab_torch.load(file)
    inputs = {}
    for key, t in fx["inputs"].items():
        if key != "targets":
            inputs[key] = torch.tensor(t["values"], dtype=torch.long).reshape(t["shape"])
    with torch.no_grad():
        logits = model(inputs)
    want = torch.tensor(fx["logits"]["values"], dtype=torch.float64).reshape(fx["logits"]["shape"])
    err = (logits - want).abs().max().item()
    if list(logits.shape) != list(want.shape) or not err <= 1e-5:
        raise Failed(f"{os.path.basename(path)}: logits differ from the fixture's by {err:.3g} (limit 1e-5)")
    print(f"  {os.path.basename(path)}: logits equal the fixture's to {err:.1e}")


def expect_refusal(what, action, *words):
    try:
        action()
    except attnlab_torch.LoadError as e:
        if all(w in str(e) for w in words):
            return
        raise Failed(f"{what}: refused, but the message {str(e)!r} does not name {words}")
    raise Failed(f"{what}: loaded without complaint")


def check_refusals(exe, work):
    """What the loader cannot represent is refused by name, never loaded as something else."""
    with open(os.path.join(ROOT, "tests", "data", "model_encoder_pre_sinusoidal.json")) as f:
        fx = json.load(f)
    file = os.path.join(work, "refused.safetensors")
    cases = [
        ("an unknown positional kind", dict(fx["config"], positional="alibi"), fx["weights"], ("positional", "alibi")),
        ("an unknown config field", dict(fx["config"], moe_experts=4), fx["weights"], ("moe_experts",)),
        ("a missing config field", {k: v for k, v in fx["config"].items() if k != "norm"}, fx["weights"], ("norm",)),
        ("a tensor the model lacks", fx["config"], dict(fx["weights"], **{"blocks.0.gate.weight": fx["weights"]["head.bias"]}),
         ("blocks.0.gate.weight",)),
        ("a tensor of another shape", dict(fx["config"], d_ff=8), fx["weights"], ("blocks.0.ff.fc1.weight", "shape")),
        ("randomised positions of another range than the table", dict(fx["config"], random_positions=7),
         fx["weights"], ("random_positions = 7", "max_len")),
    ]
    for what, cfg, weights, words in cases:
        write_model_file(file, cfg, weights)
        expect_refusal(what, lambda: attnlab_torch.load(file), *words)
    run = os.path.join(work, RUNS[0][0])
    for text, word in (("3 x 1", "'x'"), ("3 <eos>", "<eos>"), (" ".join(["1"] * 100), "at most 64 positions")):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "pytorch", "attnlab_torch.py"), run, "--predict", text],
                           capture_output=True, text=True)
        lines = r.stderr.strip().split("\n")
        if r.returncode != 2 or len(lines) != 1 or word not in lines[0] or r.stdout:
            raise Failed(f"attnlab_torch.py --predict {text!r}: exit {r.returncode}, stderr {r.stderr!r}; "
                         f"expected exit 2 and one line naming {word}")
    print(f"  {len(cases)} unrepresentable checkpoints and 3 bad inputs refused by name")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attnlab", required=True, help="the attnlab executable")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="attnlab-test-torch-loader-")
    rng = random.Random(17)
    try:
        for path in sorted(os.path.join(ROOT, "tests", "data", f) for f in os.listdir(os.path.join(ROOT, "tests", "data"))
                           if f.startswith("model_") and f.endswith(".json")):
            check_fixture(work, path)
        distinct = [check_run(args.attnlab, work, name, flags, gen, rng) for name, flags, gen in RUNS]
        check_refusals(args.attnlab, work)
        # Equal answers prove little if every input got the same one.
        if min(distinct) < 3:
            raise Failed(f"too few distinct answers to compare ({distinct}): train longer")
    except (Failed, attnlab_torch.LoadError) as e:
        print(f"test_torch_loader: FAILED: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("test_torch_loader: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
