#!/usr/bin/python3
"""A stand-in for `attnlab train` in the tests of scripts/tools/tune.py and scripts/tools/sweep.py: it writes a
run directory the way attnlab does (metrics.csv rows flushed one by one, summary.json at the end,
checkpoints/step-NNNNNNNN{,.optim}.safetensors at every evaluation, a checkpoint and exit 143 on
SIGTERM or 130 on SIGINT, --resume continuing from the last checkpoint) with held-out figures that
follow from its flags alone, so a test knows which trials must win, lose and be pruned, in a
fraction of a second per run.

  held-out exact match at step s = min(1, s * lr / (1 + seed / 10)); --target F stops at F
  held-out token accuracy = 1 - exact match / 2: unlike exact match on purpose, so that a tool
    reading the wrong column picks the wrong winners
  held-out loss = 2 - that exact match
  --layers 3 is refused when training starts (exit 2, one line) but passes --check, as a
    combination of values that only training meets would
  --crash-at S exits 1 with a message after step S (a crashed run)
  FAKE_ATTNLAB_EVAL_SECONDS: the time between evaluations (default 0.05)

train --check refuses what attnlab would refuse of these flags (an unknown one, one given twice,
--target outside [0, 1], a learning rate <= 0) with one line and exit 2, and prints the resolved
`name = value` lines. Every train command appends its arguments to RUN/fake_argv.txt (a line each),
so a test can see how a tool started or resumed a run. `claim-dir` is attnlab's own: it is passed to
the attnlab binary named by FAKE_ATTNLAB_REAL.
"""
import json
import os
import signal
import sys
import time

KNOWN = {"run", "resume", "overwrite", "quiet", "threads", "check", "lr", "seed", "steps", "eval-every", "target",
         "crash-at", "layers", "task", "heads", "d-model"}
DEFAULTS = {"task": "reverse", "lr": "1e-3", "seed": "0", "steps": "100", "eval-every": "10", "target": "0"}


def refuse(message):
    print(f"attnlab train: {message}", file=sys.stderr)
    sys.exit(2)


def parse(args):
    flags = {}
    i = 0
    while i < len(args):
        if not args[i].startswith("--"):
            refuse(f"unexpected argument '{args[i]}'")
        name, eq, value = args[i][2:].partition("=")
        if name not in KNOWN:
            refuse(f"unrecognised option '--{name}' (see attnlab train --help)")
        if name in flags:
            refuse(f"option '--{name}' cannot be specified more than once (see attnlab train --help)")
        if eq:
            flags[name] = value
            i += 1
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            flags[name] = args[i + 1]
            i += 2
        else:
            flags[name] = True
            i += 1
    return flags


def check(flags):
    if not 0 <= float(flags.get("target", "0")) <= 1:
        refuse(f"--target must be in [0, 1], got {flags['target']}")
    if float(flags.get("lr", "1e-3")) <= 0:
        refuse(f"--lr must be > 0, got {flags['lr']}")


def read_config(run):
    with open(os.path.join(run, "config.ini")) as f:
        return dict(line.rstrip("\n").split(" = ", 1) for line in f if " = " in line)


def checkpoint_steps(run):
    d = os.path.join(run, "checkpoints")
    names = os.listdir(d) if os.path.isdir(d) else []
    return sorted(int(n[5:13]) for n in names if n.startswith("step-") and n.endswith(".optim.safetensors"))


def checkpoint(run, step):
    for suffix in (".safetensors", ".optim.safetensors"):
        open(os.path.join(run, "checkpoints", f"step-{step:08d}{suffix}"), "w").close()


def start(flags):
    """The run's directory and settings, as train starts, resumes or overwrites it; the step to continue from."""
    if "resume" in flags:
        run = flags["resume"]
        if not checkpoint_steps(run):
            refuse(f"run directory '{run}' has no checkpoint yet")
        settings = read_config(run)
        settings.update({k: v for k, v in flags.items() if k in ("steps", "quiet")})
        return run, settings, checkpoint_steps(run)[-1]
    run = flags["run"]
    if os.path.exists(run) and "overwrite" not in flags:
        refuse(f"run directory '{run}' already exists; use --resume {run}, another --run, or --overwrite")
    if flags.get("layers") == "3":
        refuse("--layers 3 is refused by this fake attnlab")
    os.makedirs(os.path.join(run, "checkpoints"), exist_ok=True)
    for name in os.listdir(os.path.join(run, "checkpoints")):
        os.remove(os.path.join(run, "checkpoints", name))
    settings = dict(DEFAULTS, **{k: str(v) for k, v in flags.items() if k not in ("run", "overwrite", "check")})
    with open(os.path.join(run, "config.ini"), "w") as f:
        f.write("".join(f"{k} = {v}\n" for k, v in settings.items()))
    return run, settings, 0


def main():
    args = sys.argv[1:]
    if args and args[0] == "claim-dir":
        os.execv(os.environ["FAKE_ATTNLAB_REAL"], [os.environ["FAKE_ATTNLAB_REAL"]] + args)
    if args == ["--version"]:
        print("attnlab (tests/fake_attnlab.py)")
        return
    assert args[0] == "train"
    flags = parse(args[1:])
    check(flags)
    if "check" in flags:
        print("".join(f"{k} = {v}\n" for k, v in dict(DEFAULTS, **flags).items() if k != "check"), end="")
        return
    run, s, begin = start(flags)
    with open(os.path.join(run, "fake_argv.txt"), "a") as f:
        f.write(" ".join(args) + "\n")
    open(os.path.join(run, "started"), "w").close()  # its time says when this part of the run began
    lr, seed, steps, every = float(s["lr"]), int(s["seed"]), int(s["steps"]), int(s["eval-every"])
    target, crash = float(s["target"]), int(s.get("crash-at", "-1"))
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(143))
    signal.signal(signal.SIGINT, lambda *_: stop.append(130))
    path = os.path.join(run, "metrics.csv")
    kept = []
    if begin:  # the rows up to the checkpoint resumed from, as attnlab keeps them
        with open(path) as f:
            kept = [line for line in f.readlines()[1:] if int(line.split(",")[0]) <= begin]
    metrics = open(path, "w")
    metrics.write("step,loss,heldout_exact,heldout_token_acc,heldout_loss\n")
    metrics.write("".join(kept))
    metrics.flush()
    solved, exact, step = -1, 0.0, begin
    for step in range(begin + every, steps + 1, every):
        time.sleep(float(os.environ.get("FAKE_ATTNLAB_EVAL_SECONDS", "0.05")))
        exact = min(1.0, step * lr / (1 + seed / 10))
        metrics.write(f"{step},{1 - exact:.4f},{exact:.4f},{1 - exact / 2:.4f},{2 - exact:.4f}\n")
        metrics.flush()
        if step == crash:
            print(f"attnlab train: simulated crash at step {step}", file=sys.stderr)
            sys.exit(1)
        checkpoint(run, step)
        if stop:
            sys.exit(stop[0])
        if target > 0 and exact >= target:
            solved = step
            break
    with open(os.path.join(run, "summary.json"), "w") as f:
        json.dump({"heldout_exact": round(exact, 4), "heldout_token_acc": round(1 - exact / 2, 4), "solved_at_step": solved,
                   "steps": step, "seconds": 0.1}, f)


if __name__ == "__main__":
    main()
