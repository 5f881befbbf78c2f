#!/usr/bin/python3
"""What data-parallel training costs here: step time and bytes moved per step.

usage: scripts/studies/distributed_bench.py [--attnlab PATH] [--mpirun PATH] [--work DIR]
                                    [--configs S,M,L] [--steps N] [--max-np 8] [--json FILE]

Trains docs/benchmark.md's S, M and L shapes (attnlab train on copy, encoder,
V = T = 16, 32, 64, batch 64, 64, 32, no dropout) as
  np 1                                     the reference: step time only
  np 2  x  gather | reduce-scatter | reduce-scatter + --shard-optimizer
                                           step time and bytes (--steps steps)
  np 3 .. --max-np, oversubscribed, the same three ways, one step: bytes only
    (more processes than cores share the cores, so their times mean nothing)
and prints one Markdown table: ms per step (summary.json's seconds over the
steps: it includes the first step and a 16-example evaluation), bytes
received and sent per rank per step (rank 0's, as summary.json counts them),
seconds per step in collectives, and the optimizer state per rank. Every
figure is read from the runs' summary.json. --json writes the rows too.
As root, Open MPI's run-as-root variables are set for mpirun.

Then (or alone, from an earlier --json with --from-json) the alpha-beta
model of docs/distributed.md predicts the step time at 16 and 64 processes
over 10 and 100 Gb/s links from the one-process step time T1 and P: the
global batch shared out (T1 / N) plus, with no overlap, for one partial sum
per rank (K a power of two) and g = 4P bytes of gradient,
  gather                (N-1) a + (N-1) g b
  reduce-scatter       2(N-1) a + 2(N-1)/N g b
  + --shard-optimizer  3(N-1) a + (2(N-1)/N g + (N-1)/N 8P/2048) b
each plus (N-1) a for the statistics' all-gather. The links' a (latency per
message) and b (seconds per byte) are assumptions: 20 us and 0.8 ns/B for 10
Gb/s Ethernet, 5 us and 0.08 ns/B for 100 Gb/s with RDMA.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from attnlab_runs.files import read_summary
from attnlab_runs.launch import ROOT

SHAPES = {  # name: V = T, d, heads, layers, d_ff, batch (bench/shapes.h)
    "S": (16, 64, 4, 2, 256, 64),
    "M": (32, 128, 8, 4, 512, 64),
    "L": (64, 256, 8, 6, 1024, 32),
}
WAYS = {"gather": ["--reduction", "gather"], "reduce-scatter": ["--reduction", "reduce-scatter"],
        "reduce-scatter+shard": ["--reduction", "reduce-scatter", "--shard-optimizer"]}


def train(args, name, np_, way, steps, run):
    v, d, h, layers, d_ff, batch = SHAPES[name]
    batch = np_ * max(1, batch // np_)  # every process gets an equal share
    flags = ["train", "--task", "copy", "--model", "encoder", "--vocab", str(v), "--min-len", str(v),
             "--max-len", str(v), "--d-model", str(d), "--heads", str(h), "--layers", str(layers), "--d-ff",
             str(d_ff), "--batch-size", str(batch), "--dropout", "0", "--target", "0", "--heldout", "16",
             "--steps", str(steps), "--eval-every", str(steps), "--log-every", str(steps), "--quiet",
             "--run", run] + (WAYS[way] if way else [])
    command = [args.attnlab] + flags
    if np_ > 1:
        command = [args.mpirun, "--oversubscribe", "-np", str(np_)] + command
    env = dict(os.environ)
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"distributed_bench: {' '.join(command)} failed ({done.returncode}): {done.stderr.strip()}")
    s = read_summary(run)
    return {"config": name, "np": np_, "way": way or "-", "parameters": s["parameters"],
            "ms_per_step": 1000 * s["seconds"] / steps if np_ <= 2 else None,
            "received": s.get("comm_bytes_received_per_step", 0), "sent": s.get("comm_bytes_sent_per_step", 0),
            "comm_ms": 1000 * s.get("comm_seconds_per_step", 0) if np_ <= 2 else None,
            "optimizer_state_bytes": s["optimizer_state_bytes"], "cpu": s.get("cpu", "")}


LINKS = {"10 Gb/s": (20e-6, 0.8e-9), "100 Gb/s": (5e-6, 0.08e-9)}


def predicted_ms(t1_ms, p, n, alpha, beta):
    g = 4.0 * p
    stats = (n - 1) * alpha
    gather = (n - 1) * alpha + (n - 1) * g * beta + stats
    scatter = 2 * (n - 1) * alpha + 2 * (n - 1) / n * g * beta + stats
    sharded = 3 * (n - 1) * alpha + (2 * (n - 1) / n * g + (n - 1) / n * 8 * p / 2048) * beta + stats
    return [t1_ms / n + 1000 * c for c in (gather, scatter, sharded)]


def predict(rows):
    print("\n| config | P | N | link | T1/N ms | gather ms/step | reduce-scatter ms/step | sharded ms/step |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["np"] != 1:
            continue
        for n in (16, 64):
            for link, (alpha, beta) in LINKS.items():
                g, s, z = predicted_ms(r["ms_per_step"], r["parameters"], n, alpha, beta)
                print(f"| {r['config']} | {r['parameters']:,} | {n} | {link} | {r['ms_per_step'] / n:,.2f} | {g:,.1f} | "
                      f"{s:,.1f} | {z:,.1f} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--attnlab", default=os.path.join(ROOT, "build", "attnlab"))
    p.add_argument("--mpirun", default="mpirun")
    p.add_argument("--work", default=None, help="run directories here (default: a temporary one)")
    p.add_argument("--configs", default="S,M,L")
    p.add_argument("--steps", type=int, default=0, help="timed steps; 0 = 20 (S), 8 (M), 4 (L)")
    p.add_argument("--max-np", type=int, default=8)
    p.add_argument("--json", default=None)
    p.add_argument("--from-json", default=None, help="predict from an earlier --json, measuring nothing")
    args = p.parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            predict(json.load(f))
        return
    work = args.work or tempfile.mkdtemp(prefix="distributed_bench-")
    rows = []
    for name in args.configs.split(","):
        if name not in SHAPES:
            sys.exit(f"distributed_bench: --configs takes S, M and L, got '{name}'")
        steps = args.steps or {"S": 20, "M": 8, "L": 4}[name]
        runs = [(1, None, steps)] + [(2, w, steps) for w in WAYS]
        runs += [(n, w, 1) for n in range(3, args.max_np + 1) for w in WAYS]
        for np_, way, k in runs:
            run = os.path.join(work, f"{name}-np{np_}-{way or 'one'}")
            rows.append(train(args, name, np_, way, k, os.path.join(run)))
            print(f"# {name} np {np_} {way or ''}: done", file=sys.stderr)
    print(f"CPU: {rows[0]['cpu']}\n")
    print("| config | P | np | way | ms/step | received B/step | sent B/step | comm ms/step | optimizer state B |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ms = "" if r["ms_per_step"] is None else f"{r['ms_per_step']:,.1f}"
        comm = "" if r["comm_ms"] is None else f"{r['comm_ms']:,.2f}"
        print(f"| {r['config']} | {r['parameters']:,} | {r['np']} | {r['way']} | {ms} | {r['received']:,.0f} | "
              f"{r['sent']:,.0f} | {comm} | {r['optimizer_state_bytes']:,} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    predict(rows)


if __name__ == "__main__":
    main()
