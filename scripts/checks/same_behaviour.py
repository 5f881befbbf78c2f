#!/usr/bin/python3
"""Fingerprints of five training configurations, to show a refactor changed no bits.

usage: scripts/checks/same_behaviour.py --attnlab EXE --out MANIFEST.json
       scripts/checks/same_behaviour.py --compare BEFORE.json AFTER.json

Each configuration is trained twice: straight through, and half-way then
--resume to the end. The manifest holds the SHA-256 of every file of both
run directories, with what depends on the clock left out (metrics.csv's
tokens_per_s and elapsed_s columns, summary.json's seconds, a checkpoint's
elapsed_s and the metadata checksum that covers it). --compare prints
every file that differs and exits 1 if any does.
"""
import argparse
import csv
import hashlib
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

SMALL = " --d-model 32 --heads 2 --d-ff 64 --layers 2 --target 0 --quiet"
CONFIGS = {
    "reverse-encoder": "--task reverse --model encoder --threads 1",
    "sort-decoder": "--task sort --model decoder --optimizer adamw --schedule cosine --warmup 4 --min-lr 1e-5"
                    " --label-smoothing 0.1 --dropout 0.1 --attn-dropout 0.1 --probe-every 5 --threads 1",
    "add-seq2seq": "--task add --model seq2seq --digits 2 --optimizer sgd --lr 0.05 --momentum 0.9 --clip 0.5"
                   " --keep 1 --threads 1",
    "copy-2-threads": "--task copy --model encoder --threads 2",
    "text-lm": "--task text --model decoder --seq-len 16 --threads 1",
}
STEPS, HALF = 20, 10
CLOCK_COLUMNS = {"tokens_per_s", "elapsed_s"}


def text_file(directory):
    path = os.path.join(directory, "text.txt")
    with open(path, "w") as f:
        for i in range(60):
            f.write(f"line {i}: the quick brown fox jumps over the lazy dog {i * 7 % 13}\n")
    return path


def train(exe, args, run, steps, resume=False):
    where = f"--resume {run}" if resume else f"--run {run}"
    command = f"{exe} train {where} --steps {steps}" + ("" if resume else f" {args} --eval-every 5{SMALL}")
    done = subprocess.run(command, shell=True, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"same_behaviour: '{command}' exited {done.returncode}: {done.stderr.strip()}")


def fingerprint(path):
    name = os.path.basename(path)
    data = open(path, "rb").read()
    if name == "metrics.csv" or (name.startswith("probe_") and name.endswith(".csv")):
        rows = list(csv.reader(io.StringIO(data.decode())))
        keep = [i for i, column in enumerate(rows[0]) if column not in CLOCK_COLUMNS]
        data = "\n".join(",".join(row[i] for i in keep if i < len(row)) for row in rows).encode()
    elif name.endswith(".safetensors"):  # the header without the clock (and the checksum that covers it)
        size = struct.unpack("<Q", data[:8])[0]
        header = json.loads(data[8:8 + size])
        for key in ("elapsed_s", "metadata_checksum"):
            header.get("__metadata__", {}).pop(key, None)
        data = json.dumps(header, sort_keys=True).encode() + data[8 + size:]
    elif name == "summary.json":
        summary = json.loads(data)
        summary.pop("seconds", None)
        data = json.dumps(summary, sort_keys=True).encode()
    return hashlib.sha256(data).hexdigest()


def manifest_of(run, label):
    out = {}
    for base, _, files in os.walk(run):
        for name in files:
            path = os.path.join(base, name)
            out[label + "/" + os.path.relpath(path, run)] = fingerprint(path)
    return out


def record(exe, out):
    manifest = {}
    # One fixed directory: config.ini and the checkpoints' metadata hold the run's path.
    tmp = os.path.join(tempfile.gettempdir(), "attnlab-same-behaviour")
    if os.path.exists(tmp):
        sys.exit(f"same_behaviour: {tmp} exists (an earlier check still running, or left behind): remove it first")
    os.makedirs(tmp)
    try:
        data = text_file(tmp)
        for name, args in CONFIGS.items():
            args = args + (f" --file {data}" if "--task text" in args else " --heldout 64")
            straight, resumed = os.path.join(tmp, name), os.path.join(tmp, name + "-resumed")
            train(exe, args, straight, STEPS)
            train(exe, args, resumed, HALF)
            train(exe, args, resumed, STEPS, resume=True)
            manifest.update(manifest_of(straight, name))
            manifest.update(manifest_of(resumed, name + "-resumed"))
            print(f"{name}: {len(manifest)} files so far", flush=True)
    finally:
        shutil.rmtree(tmp)
    with open(out, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)


def compare(before, after):
    a, b = json.load(open(before)), json.load(open(after))
    differ = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    for k in differ:
        print(f"differs: {k}")
    print(f"{len(a)} files before, {len(b)} after, {len(differ)} differ")
    return 1 if differ else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attnlab")
    ap.add_argument("--out")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    a = ap.parse_args()
    if a.compare:
        sys.exit(compare(*a.compare))
    if not (a.attnlab and a.out):
        ap.error("--attnlab and --out, or --compare")
    record(os.path.abspath(a.attnlab), a.out)


if __name__ == "__main__":
    main()
