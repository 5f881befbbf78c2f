#!/usr/bin/python3
"""scripts/attnlab_runs/schema.py says what attnlab writes and what its report reads:
summary.json's keys and metrics.csv's columns against the C++ that writes them (its source, and
a real run of a tagger and of a language model), the outcome columns and the curves against
cli/report/*.js.

usage: tests/test_run_schema.py --attnlab PATH   (PYTHONPATH: scripts, as ctest sets it)
"""
import argparse
import csv
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

from attnlab_runs import schema
from checks import check, verdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--d-model", "8", "--heads", "2", "--layers", "1", "--d-ff", "16", "--steps", "2", "--eval-every", "1",
        "--batch-size", "2", "--quiet", "--threads", "1"]
ALL_SUMMARY_KEYS = (schema.SUMMARY_KEYS + schema.SUMMARY_KEYS_DISTRIBUTED + schema.SUMMARY_KEYS_LANGUAGE_MODEL +
                    schema.SUMMARY_KEYS_TOKEN_MODEL + schema.SUMMARY_KEYS_IN_CONTEXT)


def function_body(signature):
    """The text of the C++ function under ROOT whose definition starts with `signature`, braces balanced."""
    for path in sorted(glob.glob(os.path.join(ROOT, "*", "**", "*.cpp"), recursive=True)):
        if "/tests/" in path or "/build" in path:
            continue
        text = open(path, encoding="utf-8").read()
        at = text.find(signature)
        if at < 0:
            continue
        depth, start = 0, text.index("{", at)
        for i in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                return text[start:i + 1]
    sys.exit(f"test_run_schema: no C++ function '{signature}' under {ROOT}")


def source():
    summary = function_body("void write_summary(")
    keys = re.findall(r'\{"(\w+)",', summary) + re.findall(r'summary\["(\w+)"\]', summary)
    check(sorted(set(keys)) == sorted(ALL_SUMMARY_KEYS), "the C++ that writes summary.json writes the schema's keys",
          f"C++: {sorted(set(keys))}\nschema: {sorted(ALL_SUMMARY_KEYS)}")
    columns = re.findall(r'"(\w+)"', function_body("const std::vector<std::string>& MetricsLog::columns()"))
    check(columns == schema.METRICS_COLUMNS, "the C++ that writes metrics.csv writes the schema's columns, in order",
          f"C++: {columns}\nschema: {schema.METRICS_COLUMNS}")
    columns = re.findall(r'"(\w+)"', function_body("const std::vector<std::string>& SharpnessProbe::columns()"))
    check(columns == schema.PROBE_SHARPNESS_COLUMNS,
          "the C++ that writes probe_sharpness.csv writes the schema's columns, in order",
          f"C++: {columns}\nschema: {schema.PROBE_SHARPNESS_COLUMNS}")
    for signature, file, want in (("TrainingInduction::columns()", schema.PROBE_INDUCTION, schema.PROBE_INDUCTION_COLUMNS),
                                  ("TrainingFourier::columns()", schema.EMBEDDING_FOURIER,
                                   schema.EMBEDDING_FOURIER_COLUMNS)):
        columns = re.findall(r'"(\w+)"', function_body("const std::vector<std::string>& " + signature))
        check(columns == want, f"the C++ that writes {file} writes the schema's columns, in order",
              f"C++: {columns}\nschema: {want}")


def header_of(work, run, name):
    with open(os.path.join(work, run, name), newline="") as f:
        return next(csv.reader(f))


def train(exe, work, name, flags):
    run = os.path.join(work, name)
    r = subprocess.run([exe, "train", "--run", run] + flags + TINY, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"test_run_schema: attnlab train {' '.join(flags)} exited {r.returncode}: {r.stderr.strip()}")
    with open(os.path.join(run, schema.SUMMARY)) as f:
        summary = json.load(f)
    with open(os.path.join(run, schema.METRICS), newline="") as f:
        header = next(csv.reader(f))
    return summary, header


def runs(exe):
    with tempfile.TemporaryDirectory() as work:
        summary, header = train(exe, work, "tagger", ["--task", "copy", "--vocab", "4", "--min-len", "2",
                                                      "--max-len", "3", "--model", "encoder", "--heldout", "4",
                                                      "--probe-sharpness", "1"])
        check(sorted(summary) == sorted(schema.SUMMARY_KEYS), "a tagger's summary.json has the schema's keys",
              f"run: {sorted(summary)}\nschema: {sorted(schema.SUMMARY_KEYS)}")
        check(header == schema.METRICS_COLUMNS, "its metrics.csv has the schema's columns", f"run: {header}")
        with open(os.path.join(work, "tagger", schema.PROBE_SHARPNESS), newline="") as f:
            header = next(csv.reader(f))
        check(header == schema.PROBE_SHARPNESS_COLUMNS, "its probe_sharpness.csv has the schema's columns", f"run: {header}")
        text = os.path.join(ROOT, "data", "text", "logbook.txt")
        summary, header = train(exe, work, "lm", ["--task", "text", "--file", text, "--seq-len", "8", "--model", "decoder"])
        want = schema.SUMMARY_KEYS + schema.SUMMARY_KEYS_LANGUAGE_MODEL + schema.SUMMARY_KEYS_IN_CONTEXT
        check(sorted(summary) == sorted(want), "a character language model's summary.json has the schema's keys and its own",
              f"run: {sorted(summary)}\nschema: {sorted(want)}")
        check(header == schema.METRICS_COLUMNS, "its metrics.csv has the schema's columns", f"run: {header}")
        train(exe, work, "decoder", ["--task", "copy", "--vocab", "4", "--min-len", "2", "--max-len", "3", "--model",
                                     "decoder", "--heldout", "4", "--probe-induction", "1"])
        header = header_of(work, "decoder", schema.PROBE_INDUCTION)
        check(header == schema.PROBE_INDUCTION_COLUMNS, "a decoder's probe_induction.csv has the schema's columns",
              f"run: {header}")
        train(exe, work, "modular", ["--task", "modular", "--modulus", "5", "--model", "decoder"])
        header = header_of(work, "modular", schema.EMBEDDING_FOURIER)
        check(header == schema.EMBEDDING_FOURIER_COLUMNS, "a modular run's embedding_fourier.csv has the schema's columns",
              f"run: {header}")
        summary, header = train(exe, work, "repeat", ["--task", "repeat", "--vocab", "4", "--min-len", "3", "--max-len", "6",
                                                      "--model", "decoder"])
        want = schema.SUMMARY_KEYS + schema.SUMMARY_KEYS_TOKEN_MODEL + schema.SUMMARY_KEYS_IN_CONTEXT
        check(sorted(summary) == sorted(want), "a token language model's summary.json has the schema's keys and its own",
              f"run: {sorted(summary)}\nschema: {sorted(want)}")


def report():
    folder = os.path.join(ROOT, "cli", "report")
    js = "".join(open(os.path.join(folder, f), encoding="utf-8").read() for f in sorted(os.listdir(folder)) if f.endswith(".js"))
    outcomes = re.search(r"const OUTCOMES = new Set\(\[(.*?)\]\)", js, re.S)
    names = re.findall(r'"(\w+)"', outcomes.group(1)) if outcomes else []
    check(names == schema.OUTCOME_COLUMNS, "sweep.js's OUTCOMES are the schema's outcome columns",
          f"sweep.js: {names}\nschema: {schema.OUTCOME_COLUMNS}")
    sharpness = open(os.path.join(folder, "sharpness.js"), encoding="utf-8").read()
    read = set(re.findall(r'column\(table, "(\w+)"\)', sharpness) + re.findall(r'(?:points|at)\("(\w+)"\)', sharpness))
    check(read and read <= set(schema.PROBE_SHARPNESS_COLUMNS), "the columns sharpness.js reads are probe_sharpness.csv's",
          f"sharpness.js: {sorted(read)}")
    mechanisms = open(os.path.join(folder, "mechanisms.js"), encoding="utf-8").read()
    read = set(re.findall(r'column\(table, "(\w+)"\)', mechanisms))
    want = set(schema.PROBE_INDUCTION_COLUMNS) | set(schema.EMBEDDING_FOURIER_COLUMNS)
    check(read and read <= want, "the columns mechanisms.js reads are probe_induction.csv's and embedding_fourier.csv's",
          f"mechanisms.js: {sorted(read)}")
    curves = re.search(r"const CURVES = \[(.*?)\];", js, re.S)
    cols = re.findall(r'"(\w+)"', re.sub(r'title: "[^"]*"', "", curves.group(1))) if curves else []
    check(cols and set(cols) <= set(schema.METRICS_COLUMNS), "the curves curves.js draws are metrics.csv columns",
          f"curves.js: {cols}")
    verdict_js = re.search(r"function verdict\(run\) \{\n  const s = run.summary;(.*?)\n\}", js, re.S)
    read = set(re.findall(r"\bs\.(\w+)", verdict_js.group(1) if verdict_js else "")) | set(
        re.findall(r'mark\("(\w+)"', js)) | set(re.findall(r'"(\w+)" in sum\b', js))
    check(verdict_js and read <= set(ALL_SUMMARY_KEYS), "the summary.json keys the report reads are the schema's",
          f"the report reads: {sorted(read)}")


def tools():
    check(set(schema.SWEEP_OUTCOMES) <= set(schema.OUTCOME_COLUMNS), "sweep.py's outcome columns are the report's outcomes")
    try:
        import tune_results  # Optuna's
    except ImportError:
        print("skipped: tune.py's columns (no optuna)")
        return
    for objective in ("exact", "loss", "steps"):
        written = tune_results.columns([], objective)[1]
        check(set(written) <= set(schema.OUTCOME_COLUMNS),
              f"tune.py's summary.csv columns (--objective {objective}, no parameters) are the report's outcomes",
              f"not outcomes: {sorted(set(written) - set(schema.OUTCOME_COLUMNS))}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--attnlab", required=True)
    exe = ap.parse_args().attnlab
    source()
    runs(exe)
    report()
    tools()
    return verdict("test_run_schema")


if __name__ == "__main__":
    sys.exit(main())
