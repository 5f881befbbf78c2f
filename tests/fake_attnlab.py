#!/usr/bin/python3
"""A stand-in for `attnlab train` in tests/test_tune.py: it writes a run directory the way attnlab
does (metrics.csv rows flushed one by one, summary.json at the end, a checkpoint and exit 143 on
SIGTERM) with held-out figures that follow from its flags alone, so a tuning test knows which
trials must win, lose and be pruned, in a fraction of a second per run.

  held-out exact match at step s = min(1, s * lr / (1 + seed / 10)); --target F stops at F
  with --task text its rows also hold heldout_loss = 2 - that exact match
  --layers 3 is refused (exit 2, one line), as attnlab refuses a bad flag
  --crash-at S exits 1 with a message after step S (a crashed run)
"""
import json
import os
import signal
import sys
import time


def main():
    args = sys.argv[1:]
    assert args[0] == "train"
    flags = {}
    i = 1
    while i < len(args):
        name = args[i][2:]
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            flags[name] = args[i + 1]
            i += 2
        else:
            flags[name] = True
            i += 1
    if flags.get("layers") == "3":
        print("attnlab train: --layers 3 is refused by this fake attnlab", file=sys.stderr)
        sys.exit(2)
    run, lr, seed = flags["run"], float(flags.get("lr", "1e-3")), int(flags.get("seed", "0"))
    steps, every = int(flags.get("steps", "100")), int(flags.get("eval-every", "10"))
    target, crash = float(flags.get("target", "0")), int(flags.get("crash-at", "-1"))
    os.makedirs(os.path.join(run, "checkpoints"), exist_ok=True)
    open(os.path.join(run, "started"), "w").close()  # its time says when the run began
    with open(os.path.join(run, "config.ini"), "w") as f:
        f.write("".join(f"{k} = {v}\n" for k, v in flags.items() if k != "run"))
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    metrics = open(os.path.join(run, "metrics.csv"), "w")
    lm = flags.get("task") == "text"  # a language model's rows carry heldout_loss too
    metrics.write("step,loss,heldout_exact,heldout_token_acc" + (",heldout_loss" if lm else "") + "\n")
    metrics.flush()
    solved, exact, step = -1, 0.0, 0
    for step in range(every, steps + 1, every):
        time.sleep(float(os.environ.get("FAKE_ATTNLAB_EVAL_SECONDS", "0.05")))
        exact = min(1.0, step * lr / (1 + seed / 10))
        metrics.write(f"{step},{1 - exact:.4f},{exact:.4f},{exact:.4f}" + (f",{2 - exact:.4f}" if lm else "") + "\n")
        metrics.flush()
        if step == crash:
            print(f"attnlab train: simulated crash at step {step}", file=sys.stderr)
            sys.exit(1)
        if stop:
            open(os.path.join(run, "checkpoints", f"step_{step}.safetensors"), "w").close()
            sys.exit(143)
        if target > 0 and exact >= target:
            solved = step
            break
    open(os.path.join(run, "checkpoints", f"step_{step}.safetensors"), "w").close()
    with open(os.path.join(run, "summary.json"), "w") as f:
        json.dump({"heldout_exact": round(exact, 4), "heldout_token_acc": round(exact, 4), "solved_at_step": solved,
                   "steps": step, "seconds": 0.1}, f)


if __name__ == "__main__":
    main()
