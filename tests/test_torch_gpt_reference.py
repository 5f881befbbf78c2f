#!/usr/bin/env python3
"""scripts/studies/torch_gpt_reference.py is attnlab's decoder, data rule and training recipe (a ctest test).

Without torch (pure logic):
  - the tasks' answers (sort, reverse, copy, add with carries and leading zeros);
  - the held-out rule: distinct held-out inputs, capped at the inputs that exist; a training stream
    that draws held-out inputs from its generator and never returns one;
  - the LM batch: [bos] src [sep] tgt as input, src and sep ignored, tgt and <eos> the targets;
    with --layout bare src tgt[:-1] as input, the answer's tokens the only targets;
  - the pairs task: a file's lines, a token per character; --heldout-file: that file's pairs held out for
    every seed, their inputs never trained on, every other input of --file drawn, lengths counted from both;
  - data/pairs/adder2_heldout.tsv is scripts/tools/make_data.py's minGPT test split of data/pairs/adder2.tsv
    (500 distinct lines of it); with torch, make_data's randperm equals torch.randperm;
  - the lr schedule (warmup, constant, linear, cosine to min_lr), attnlab's weight-decay groups,
    the target-patience rule (the first step of K consecutive evaluations at the level);
  - bad options (--heldout-file's too): one line on stderr naming the value, exit 2.
With torch and the attnlab binary:
  - an attnlab checkpoint loads into the reference by name with every shape equal (no parameter more
    or less), and the reference's greedy answers and probabilities equal `attnlab predict --json`
    to 1e-4 at every decoded position, for pre-LN/learned/gelu/add, post-LN/sinusoidal/relu/tied/sort
    and pre-LN/learned/gelu/adder pairs with --layout bare;
  - 20 AdamW steps from the same weights on the same batches (one training pair) end at the same
    weights in attnlab and the reference, with either --layout;
  - each scheme of --init gives every parameter the same distribution in both: zero where one is
    zero, and the standard deviation within sampling error (a factor-of-2 difference fails);
  - scripts/studies/same_batches.py replays attnlab's training stream: from attnlab's initial weights the
    reference's loss equals attnlab's at each of the first 20 steps of the adder study's seed 1
    (a different batch would differ by about 1e-2); its std::mt19937_64 gives the C++ standard's
    10,000th number (without torch).

    test_torch_gpt_reference.py --attnlab BUILD/attnlab
Exit 0: passed; 1: failed; 77: torch cannot be imported (ctest: skipped; the logic tests ran and passed).
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "studies", "torch_gpt_reference.py")
import make_data  # noqa: E402
import same_batches  # noqa: E402
import torch_gpt_reference as R  # noqa: E402

FAILURES = []


def expect(ok, what):
    if not ok:
        FAILURES.append(what)
        print(f"FAILED: {what}", file=sys.stderr)


def sym(*digits):
    return [R.FIRST_SYMBOL + d for d in digits]


def test_tasks():
    sort, rev = R.Task("sort", 3, 6, 6, 0), R.Task("reverse", 10, 3, 3, 0)
    expect(sort.solve(sym(2, 0, 1, 0, 2, 2)) == sym(0, 0, 1, 2, 2, 2), "sort sorts ascending, repeats kept")
    expect(rev.solve(sym(3, 1, 4)) == sym(4, 1, 3), "reverse")
    expect(R.Task("copy", 5, 2, 4, 0).solve(sym(3, 1)) == sym(3, 1), "copy")
    add = R.Task("add", 0, 0, 0, 2)
    plus = R.FIRST_SYMBOL + 10
    expect(add.solve(sym(9, 9) + [plus] + sym(9, 9)) == sym(1, 9, 8), "add: 99+99 = 198 (both carries)")
    expect(add.solve(sym(0, 5) + [plus] + sym(0, 7)) == sym(0, 1, 2), "add: 05+07 = 012 (zero-padded)")
    expect(add.vocab_size == 15 and sort.vocab_size == 7, "V = 4 specials + the task's symbols (add: 0-9 and +)")
    expect(add.input_space_size() == 10000 and sort.input_space_size() == 729, "input spaces 10^4 and 3^6")
    rng = random.Random(5)
    x = add.sample_input(rng)
    expect(len(x) == 5 and x[2] == plus and all(R.FIRST_SYMBOL <= t < plus for t in x[:2] + x[3:]),
           f"add input: two digits, '+', two digits (got {x})")
    lengths = {len(R.Task("copy", 4, 2, 5, 0).sample_input(rng)) for _ in range(200)}
    expect(lengths == {2, 3, 4, 5}, f"inputs take every length of min-len..max-len (got {sorted(lengths)})")


def test_heldout_rule():
    task = R.Task("sort", 3, 6, 6, 0)
    held = R.make_heldout(task, 182, 0)
    inputs = {tuple(s) for s, _ in held}
    expect(len(held) == 182 and len(inputs) == 182, "182 distinct held-out inputs")
    expect(all(t == task.solve(s) for s, t in held), "held-out answers are the task's")
    expect(len(R.make_heldout(R.Task("sort", 2, 3, 3, 0), 500, 0)) == 8, "held-out size capped at the 2^3 inputs")
    stream = R.TrainStream(task, held, 0)
    batch = stream.next_batch(4000)
    expect(not any(tuple(s) in inputs for s, _ in batch), "the training stream never returns a held-out input")
    raw = random.Random("train-0")
    drawn = [tuple(task.sample_input(raw)) for _ in range(4000)]
    expect(sum(d in inputs for d in drawn) > 500, "the training generator does draw held-out inputs (rejected)")
    expect(R.make_heldout(task, 50, 1) != R.make_heldout(task, 50, 2), "the held-out set depends on the seed")
    try:
        R.TrainStream(R.Task("sort", 2, 3, 3, 0), R.make_heldout(R.Task("sort", 2, 3, 3, 0), 8, 0), 0)
        expect(False, "a held-out set of every input leaves nothing to train on: refused")
    except ValueError:
        pass


def test_batch_format(torch):
    x, y = R.lm_batch(torch, [(sym(2, 0), sym(0, 2)), (sym(1, 1, 1), sym(1, 1, 1))])
    I, B, S, E, P = R.IGNORE, R.BOS, R.SEP, R.EOS, R.PAD
    expect(x.tolist() == [[B, 6, 4, S, 4, 6, P, P], [B, 5, 5, 5, S, 5, 5, 5]], f"LM inputs (got {x.tolist()})")
    expect(y.tolist() == [[I, I, I, 4, 6, E, I, I], [I, I, I, I, 5, 5, 5, E]], f"LM targets (got {y.tolist()})")
    x, y = R.lm_batch(torch, [(sym(2, 0), sym(0, 2)), (sym(1, 1, 1), sym(3))], "bare")
    expect(x.tolist() == [[6, 4, 4], [5, 5, 5]], f"bare inputs: src tgt[:-1] (got {x.tolist()})")
    expect(y.tolist() == [[I, 4, 6], [I, I, 7]], f"bare targets: the answer only (got {y.tolist()})")


def test_pairs_task():
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "p.tsv")
        with open(path, "w") as f:
            f.write("ab\tba\n\nca\tc\n")
        task = R.Task("pairs", 0, 0, 0, 0, path)
        a, b, c = sym(0, 1, 2)  # the characters a, b, c in sorted order
        expect(task.inputs == [(a, b), (c, a)] and task.solve([c, a]) == [c], "pairs: each line, a token per character")
        expect(task.vocab_size == 7 and task.max_input_len() == 2 and task.max_output_len() == 2, "pairs: V and lengths")
        expect(task.sample_input(random.Random(0)) in ([a, b], [c, a]), "pairs: inputs drawn from the file's")


def write(work, name, text):
    path = os.path.join(work, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def test_heldout_file():
    """--heldout-file: its pairs are the held-out set whatever the seed, answers from it (an input may be
    absent from --file), no held-out input is trained on and every other input of --file is."""
    with tempfile.TemporaryDirectory() as work:
        train = write(work, "p.tsv", "ab\tba\nca\tc\nbb\tb\ncc\tcc\n")
        held = write(work, "h.tsv", "ca\tc\n\nabc\tcba\nca\tc\n")  # a repeat, and an input not in p.tsv
        task = R.Task("pairs", 0, 0, 0, 0, train, held)
        a, b, c = sym(0, 1, 2)
        expect(task.heldout_pairs == [([c, a], [c]), ([a, b, c], [c, b, a])], f"held-out pairs (got {task.heldout_pairs})")
        expect(task.max_input_len() == 3 and task.max_output_len() == 3, "lengths count the held-out file's pairs")
        expect(R.make_heldout(task, 500, 1) == R.make_heldout(task, 5, 2) == task.heldout_pairs,
               "the held-out set is the file's whatever --heldout and the seed")
        drawn = {tuple(s) for s, _ in R.TrainStream(task, R.make_heldout(task, 0, 0), 3).next_batch(300)}
        expect(drawn == {(a, b), (b, b), (c, c)}, f"training draws exactly the inputs not held out (got {drawn})")
        everything = R.Task("pairs", 0, 0, 0, 0, train, write(work, "all.tsv", "ab\tba\nca\tc\nbb\tb\ncc\tcc\n"))
        try:
            R.TrainStream(everything, R.make_heldout(everything, 0, 0), 0)
            expect(False, "a held-out file of every input leaves nothing to train on: refused")
        except ValueError:
            pass


def test_adder_split():
    """data/pairs/adder2_heldout.tsv is make_data's minGPT test split: 500 distinct lines of adder2.tsv."""
    data = os.path.join(ROOT, "data", "pairs")
    with open(os.path.join(data, "adder2_heldout.tsv"), encoding="utf-8") as f:
        held = f.read()
    with open(os.path.join(data, "adder2.tsv"), encoding="utf-8") as f:
        every = set(f.read().splitlines())
    expect(held == make_data.adder_heldout_tsv(), "adder2_heldout.tsv is scripts/tools/make_data.py's (rerun it)")
    lines = held.splitlines()
    expect(len(lines) == 500 and len(set(lines)) == 500 and set(lines) <= every,
           "the held-out adder file is 500 distinct lines of adder2.tsv")
    expect(lines[0] == "7415\t980", f"the first held-out sum is 74 + 15 (minGPT's perm[0] = 7415; got {lines[0]!r})")


def test_mt19937_64():
    engine = same_batches.MT19937_64(5489)
    for _ in range(9999):
        engine()
    expect(engine() == 9981545732273789042, "std::mt19937_64's 10,000th number from the default seed")


def test_replayed_batches(torch, exe, work):
    r = same_batches.one_seed(torch, exe, "bare", 1, 20, 0.0, work)
    first, worst = r["loss_step1"], r["attnlab_vs_reference"]["max_loss_diff"]["20"]
    print(f"replayed batches: step-1 losses {first}, largest difference over 20 steps {worst:.2e}", file=sys.stderr)
    expect(abs(first[0] - first[1]) < 1e-5 and worst < 1e-4,
           f"the reference on attnlab's replayed batches has attnlab's losses (step 1 {first}, 20 steps {worst:.2e})")


def test_schedule_groups_patience():
    cfg = R.parser().parse_args(["--lr", "1e-3", "--warmup", "100", "--steps", "1100", "--min-lr", "1e-4"])
    close = lambda a, b: abs(a - b) < 1e-12  # noqa: E731
    expect(close(R.scheduled_lr(cfg, 50), 5e-4) and close(R.scheduled_lr(cfg, 100), 1e-3), "warmup: k / w of lr")
    expect(close(R.scheduled_lr(cfg, 700), 1e-3), "constant after warmup")
    cfg.schedule = "cosine"
    expect(close(R.scheduled_lr(cfg, 600), 5.5e-4) and close(R.scheduled_lr(cfg, 1100), 1e-4),
           "cosine: halfway at the middle, min-lr at --steps")
    expect(close(R.scheduled_lr(cfg, 350), 1e-4 + 9e-4 * 0.5 * (1 + math.cos(math.pi / 4))), "cosine a quarter in")
    cfg.schedule = "linear"
    expect(close(R.scheduled_lr(cfg, 350), 1e-4 + 9e-4 * 0.75), "linear a quarter in")
    decayed = ["blocks.0.attn.q_proj.weight", "blocks.2.ff.fc2.weight", "head.weight"]
    exempt = ["tok_emb.weight", "pos_emb.weight", "blocks.0.ln1.weight", "blocks.1.ln2.bias", "ln_f.weight",
              "head.bias", "blocks.0.attn.out_proj.bias"]
    expect(not any(R.no_decay(n) for n in decayed) and all(R.no_decay(n) for n in exempt),
           "weight decay on the weight matrices only (attnlab's groups)")
    evals = [[50, 1.0], [100, 0.9], [150, 1.0], [200, 1.0], [250, 1.0], [300, 0.99]]
    expect(R.held_step(evals, 1.0, 3) == 150, "patience 3: the first step of three in a row")
    expect(R.held_step(evals, 1.0, 1) == 50 and R.held_step(evals, 0.99, 4) == 150, "patience 1 and 99%")
    expect(R.held_step(evals, 1.0, 4) is None, "a streak cut by the cap is not held")


def test_bad_options():
    with tempfile.TemporaryDirectory() as work:
        pairs = write(work, "p.tsv", "ab\tba\nca\tc\n")
        same = write(work, "same.tsv", "ca\tc\nab\tba\n")
        no_tab = write(work, "no_tab.tsv", "ab\tba\nca c\n")
        foreign = write(work, "foreign.tsv", "ab\tbx\n")
        twice = write(work, "twice.tsv", "ab\tba\nab\tab\n")
        held = ["--task", "pairs", "--file", pairs, "--heldout-file"]
        cases = [(["--heads", "5"], "5"), (["--min-len", "9"], "9"), (["--steps", "0"], "0"),
                 (["--task", "sort", "--vocab", "2", "--min-len", "3", "--max-len", "3"], "8"),
                 (held + [same], "same.tsv"), (held + [no_tab], "no_tab.tsv line 2"),
                 (held + [foreign], "'x'"), (held + [twice], "twice.tsv line 2"),
                 (held + [os.path.join(work, "gone.tsv")], "gone.tsv"),
                 (held + [same, "--heldout", "1"], "--heldout does not apply"),
                 (["--task", "sort", "--heldout-file", same], "--heldout-file applies to --task pairs"),
                 (["--task", "pairs", "--file", no_tab], "no_tab.tsv line 2")]
        for flags, word in cases:
            r = subprocess.run([sys.executable, SCRIPT] + flags, capture_output=True, text=True)
            lines = r.stderr.strip().splitlines()
            expect(r.returncode == 2 and len(lines) == 1 and word in lines[0] and r.stdout == "",
                   f"{flags}: one line naming {word}, exit 2 (got {r.returncode}: {r.stderr!r})")


def attnlab_run(exe, work, name, flags):
    run = os.path.join(work, name)
    subprocess.run([exe, "train"] + flags + ["--threads", "1", "--quiet", "--run", run], check=True,
                   capture_output=True)
    ckpts = sorted(f for f in os.listdir(os.path.join(run, "checkpoints")) if f.endswith(".safetensors") and ".optim." not in f)
    return run, os.path.join(run, "checkpoints", ckpts[-1])


def reference_for(torch, flags, weights):
    cfg = R.parser().parse_args([f for f in flags if f not in ("--quiet",)])
    task = R.Task(cfg.task, cfg.vocab, cfg.min_len, cfg.max_len, cfg.digits, cfg.file)
    model = R.build_model(torch, cfg)(task.vocab_size, R.positions_for(task, cfg))
    own = {n: tuple(p.shape) for n, p in model.named_parameters()}
    theirs = {n: tuple(t.shape) for n, t in weights.items()}
    expect(own == theirs, f"the same parameters, names and shapes: only reference {set(own) - set(theirs)}, "
                          f"only attnlab {set(theirs) - set(own)}, "
                          f"shapes {[(n, own[n], theirs[n]) for n in own if n in theirs and own[n] != theirs[n]]}")
    return cfg, task, model


def test_forward_parity(torch, exe, work):
    small = ["--model", "decoder", "--d-model", "24", "--heads", "3", "--layers", "2", "--d-ff", "40", "--lr", "1e-2",
             "--steps", "40", "--eval-every", "40", "--seed", "3"]
    cases = [
        ("add-pre", ["--task", "add", "--digits", "2", "--norm", "pre", "--positional", "learned", "--activation", "gelu"],
         lambda rng: f"{rng.randint(0, 99):02d}+{rng.randint(0, 99):02d}"),
        ("sort-post", ["--task", "sort", "--vocab", "5", "--min-len", "4", "--max-len", "6", "--norm", "post",
                       "--positional", "sinusoidal", "--activation", "relu", "--tie-embeddings"],
         lambda rng: " ".join(str(rng.randint(0, 4)) for _ in range(rng.randint(4, 6)))),
        ("adder-bare", ["--task", "pairs", "--file", os.path.join(ROOT, "data", "pairs", "adder2.tsv"), "--layout",
                        "bare", "--norm", "pre", "--positional", "learned", "--activation", "gelu"],
         lambda rng: f"{rng.randint(0, 99):02d}{rng.randint(0, 99):02d}"),
    ]
    rng = random.Random(7)
    for name, flags, draw in cases:
        own = ["--tokenize", "chars", "--heldout-fraction", "0.05"] if "pairs" in flags else []
        run, ckpt = attnlab_run(exe, work, name, small + flags + own)
        weights = R.read_safetensors(torch, ckpt)
        cfg, task, model = reference_for(torch, small + flags, weights)
        bare = cfg.layout == "bare"
        model.load_state_dict(weights, strict=True)
        model.eval()
        worst, answers = 0.0, 0
        for _ in range(10):
            text = draw(rng)
            p = json.loads(subprocess.run([exe, "predict", "--run", run, "--json", text], check=True,
                                          capture_output=True, text=True).stdout)
            seq = list(p["input"]["ids"]) if bare else [R.BOS] + p["input"]["ids"] + [R.SEP]
            agree = not bare or len(p["positions"]) == 3  # bare: exactly the sum's 3 digits, no <eos>
            with torch.no_grad():
                for pos in p["positions"]:  # attnlab's decoded tokens, fed back as attnlab did
                    probs = torch.softmax(model(torch.tensor([seq]))[0, -1].double(), -1)
                    worst = max(worst, float((probs - torch.tensor(pos["probabilities"], dtype=torch.float64)).abs().max()))
                    agree &= int(probs.argmax()) == pos["token"]
                    seq.append(pos["token"])
            answers += agree
        expect(worst < 1e-4, f"{name}: probabilities equal predict --json's to 1e-4 (worst {worst:.2e})")
        expect(answers == 10, f"{name}: the same greedy answer for 10 of 10 inputs (got {answers})")


def test_training_parity(torch, exe, work):
    """20 AdamW steps on identical weights and batches (one training pair, so every batch is its
    copies) end at the same weights in both, in each layout: the loss positions, decay groups,
    clipping and AdamW are the same. A difference of a fifth of one step (lr 1e-2) fails; rounding
    alone gave at most 4e-4 (AMD EPYC, family 26, 2026-12-04)."""
    train, held = os.path.join(work, "one.tsv"), os.path.join(work, "held.tsv")
    with open(train, "w") as f:
        f.write("0123\t345\n")  # characters first seen in sorted order: the same ids in both
    with open(held, "w") as f:
        f.write("0000\t000\n")
    ref_flags = ["--model", "decoder", "--task", "pairs", "--file", train, "--d-model", "24", "--heads", "3",
                 "--layers", "2", "--d-ff", "40", "--positional", "learned", "--activation", "gelu", "--init", "gpt2",
                 "--beta2", "0.95", "--weight-decay", "0.1", "--clip", "1", "--batch-size", "8", "--seed", "3"]
    own = ["--heldout-file", held, "--tokenize", "chars"]
    for layout in ("special", "bare"):
        flags = ref_flags + ["--layout", layout]
        _, ckpt0 = attnlab_run(exe, work, f"one-{layout}-0", flags + own + ["--lr", "1e-30", "--steps", "1",
                                                                            "--eval-every", "1"])
        _, ckpt20 = attnlab_run(exe, work, f"one-{layout}-20", flags + own + ["--lr", "1e-2", "--steps", "20",
                                                                              "--eval-every", "20"])
        start, theirs = R.read_safetensors(torch, ckpt0), R.read_safetensors(torch, ckpt20)
        cfg, task, model = reference_for(torch, flags + ["--lr", "1e-2"], start)
        model.load_state_dict(start, strict=True)
        opt, params = R.make_optimizer(torch, model, cfg)
        pair = (list(task.inputs[0]), task.solve(list(task.inputs[0])))
        for step in range(1, 21):
            R.train_step(torch, model, opt, params, cfg, [pair] * cfg.batch_size, step)
        worst = max(float((p.detach() - theirs[n]).abs().max()) for n, p in model.named_parameters())
        moved = max(float((theirs[n] - start[n]).abs().max()) for n in theirs)
        print(f"training parity, layout {layout}: weights moved up to {moved:.3g}, differ by at most {worst:.2e}",
              file=sys.stderr)
        expect(moved > 0.05, f"layout {layout}: 20 steps at lr 1e-2 moved the weights (by {moved:.3g})")
        expect(worst < 2e-3, f"layout {layout}: the same weights after 20 AdamW steps (worst difference {worst:.2e})")


def test_init_distributions(torch, exe, work):
    flags = ["--model", "decoder", "--task", "sort", "--vocab", "3", "--min-len", "6", "--max-len", "6", "--d-model",
             "48", "--heads", "3", "--layers", "3", "--d-ff", "192", "--positional", "learned", "--heldout", "182"]
    for scheme in ("torch", "gpt2"):
        # One step at lr 1e-9 moves no weight by more than about 1e-9: the checkpoint is the initialisation.
        _, ckpt = attnlab_run(exe, work, f"init-{scheme}", flags + ["--init", scheme, "--lr", "1e-9", "--steps", "1",
                                                                    "--eval-every", "1"])
        theirs = R.read_safetensors(torch, ckpt)
        cfg, _, model = reference_for(torch, flags + ["--init", scheme], theirs)
        R.initialise(torch, model, scheme, cfg.layers, torch.Generator().manual_seed(0))
        for name, p in model.named_parameters():
            a, b = p.detach().double().flatten(), theirs[name].double().flatten()
            zero_a, zero_b = bool(a.abs().max() < 1e-6), bool(b.abs().max() < 1e-6)
            if zero_a or zero_b:
                expect(zero_a == zero_b, f"--init {scheme} {name}: zero in both or in neither")
                continue
            if bool((a == 1).all()) or bool((b == 1).all()):
                expect(bool((b - 1).abs().max() < 1e-6) and bool((a == 1).all()), f"--init {scheme} {name}: ones in both")
                continue
            # The sample std of n draws has a relative spread of about 1/sqrt(2n); 5 of those is the tolerance.
            ratio, tol = float(a.std() / b.std()), 5 / math.sqrt(2 * a.numel())
            expect(abs(ratio - 1) < tol, f"--init {scheme} {name}: std {float(a.std()):.4g} here, "
                                         f"{float(b.std()):.4g} in attnlab (ratio {ratio:.3f}, tolerance {tol:.3f})")
            expect(abs(float(a.mean() - b.mean())) < 6 * float(b.std()) / math.sqrt(a.numel()),
                   f"--init {scheme} {name}: the same mean")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attnlab", required=True)
    args = p.parse_args()
    test_tasks()
    test_heldout_rule()
    test_pairs_task()
    test_heldout_file()
    test_adder_split()
    test_mt19937_64()
    test_schedule_groups_patience()
    test_bad_options()
    try:
        import torch
    except ImportError:
        print("torch cannot be imported: the parity tests are skipped", file=sys.stderr)
        return 1 if FAILURES else 77
    torch.set_num_threads(1)
    order = torch.randperm(10000, generator=torch.Generator().manual_seed(1337)).tolist()
    expect(make_data.randperm(10000, 1337) == order,
           f"make_data's randperm is torch.randperm under manual_seed 1337 (torch {torch.__version__})")
    test_batch_format(torch)
    with tempfile.TemporaryDirectory() as work:
        test_forward_parity(torch, args.attnlab, work)
        test_training_parity(torch, args.attnlab, work)
        test_init_distributions(torch, args.attnlab, work)
        test_replayed_batches(torch, args.attnlab, work)
    print(f"{len(FAILURES)} failure(s)" if FAILURES else "all passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
