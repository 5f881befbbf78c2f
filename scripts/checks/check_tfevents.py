#!/usr/bin/env python3
"""Checks attnlab's TensorBoard event files against TensorBoard's own definitions.

Compiles the .proto files of tests/data/tensorboard (copied verbatim from
TensorBoard's repository) with protoc, imports them with python3-protobuf,
reads every record of an event file, checks the framing and both masked
CRC-32Cs (with a bitwise CRC written here, independent of the C++ table),
parses each Event and refuses any field the definitions do not know.

    check_tfevents.py --unit-tests BUILD/unit_tests
        runs the hidden Catch2 case "[.tfevents_fixture]", which writes an event
        file and the values it handed the writer, and compares them: scalars as
        float32, histograms recomputed here with TensorFlow's default buckets;
        then checks its metrics.csv of the same scalars as --run does.
    check_tfevents.py --run RUN_DIR
        every events.out.tfevents.* file of a run parses, and every value of
        metrics.csv appears as a scalar tagged with its column at its row's step,
        as TensorBoard shows the directory (a resumed run's SessionLog START drops
        the earlier files' values from its step on).
    check_tfevents.py --events FILE
        the file parses; prints its records.

Exit 0: checked; 1: a check failed; 77: protoc or python3-protobuf is missing
(ctest reports the test as skipped); 2: bad arguments.
"""
import argparse
import bisect
import csv
import glob
import importlib
import importlib.util
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

from attnlab_runs.launch import ROOT

SKIP = 77
DEFAULT_PROTOS = os.path.join(ROOT, "tests", "data", "tensorboard")


class CheckFailed(Exception):
    pass


def require(ok, message):
    if not ok:
        raise CheckFailed(message)


# ---- the official definitions --------------------------------------------------

def load_event_class(proto_root, workdir):
    """tensorboard.Event compiled from the .proto files, or None when protoc or protobuf is missing."""
    protoc = shutil.which("protoc")
    try:
        importlib.import_module("google.protobuf")
    except ImportError:
        print("check_tfevents: SKIPPED: python3-protobuf is not installed (apt-get install python3-protobuf)")
        return None
    if protoc is None:
        print("check_tfevents: SKIPPED: protoc is not installed (apt-get install protobuf-compiler)")
        return None
    protos = sorted(glob.glob(os.path.join(proto_root, "tensorboard", "compat", "proto", "*.proto")))
    require(protos, f"no .proto files under {proto_root}")
    subprocess.run([protoc, "-I", proto_root, "--python_out", workdir] + protos, check=True)
    for d in ("tensorboard", "tensorboard/compat", "tensorboard/compat/proto"):
        open(os.path.join(workdir, d, "__init__.py"), "a").close()
    # The compiled package `tensorboard`, taken from workdir (an installed tensorboard is not read).
    init = os.path.join(workdir, "tensorboard", "__init__.py")
    spec = importlib.util.spec_from_file_location("tensorboard", init, submodule_search_locations=[os.path.dirname(init)])
    sys.modules["tensorboard"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules["tensorboard"])
    return importlib.import_module("tensorboard.compat.proto.event_pb2").Event


# ---- records -------------------------------------------------------------------

def crc32c(data):
    """Bit by bit (no table), so it shares nothing with the C++ implementation."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_records(blob, where):
    records, at = [], 0
    while at < len(blob):
        require(at + 12 <= len(blob), f"{where}: truncated record header at byte {at}")
        header = blob[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", blob[at + 8:at + 12])
        require(length_crc == masked_crc32c(header), f"{where}: length CRC mismatch at byte {at}")
        end = at + 12 + length
        require(end + 4 <= len(blob), f"{where}: record at byte {at} runs past the end of the file")
        data = blob[at + 12:end]
        (data_crc,) = struct.unpack("<I", blob[end:end + 4])
        require(data_crc == masked_crc32c(data), f"{where}: data CRC mismatch in the record at byte {at}")
        records.append(data)
        at = end + 4
    return records


def has_unknown_fields(message):
    """True when parsing kept bytes the definitions do not name (a wrong field number)."""
    clean = type(message)()
    clean.CopyFrom(message)
    clean.DiscardUnknownFields()
    return clean.SerializeToString(deterministic=True) != message.SerializeToString(deterministic=True)


def parse_events(path, event_class):
    with open(path, "rb") as f:
        blob = f.read()
    events = []
    for i, data in enumerate(read_records(blob, path)):
        event = event_class.FromString(data)
        require(not has_unknown_fields(event), f"{path}: record {i} has fields event.proto does not define")
        events.append(event)
    require(events, f"{path}: no records")
    require(events[0].file_version == "brain.Event:2",
            f"{path}: the first record's file_version is {events[0].file_version!r}, not 'brain.Event:2'")
    for i, e in enumerate(events[1:], 1):
        what = e.WhichOneof("what")
        if what == "session_log":  # a resumed run's start (TfEventsWriter::session_start)
            require(e.session_log.status == e.session_log.START and e.step > 0,
                    f"{path}: record {i} is a session log of status {e.session_log.status} at step {e.step}, "
                    "not a START after a checkpoint")
            continue
        require(what == "summary", f"{path}: record {i} holds {what}, not a summary")
        require(len(e.summary.value) == 1, f"{path}: record {i} holds {len(e.summary.value)} values, not 1")
    return events


def values(events):
    """(tag, step, Summary.Value) for every summary value."""
    return [(v.tag, e.step, v) for e in events[1:] for v in e.summary.value]


def shown_values(paths, event_class):
    """{(tag, step): Summary.Value} as TensorBoard shows a directory of these files, read in name order:
    a SessionLog START at step s drops the values read so far at steps >= s (its purge of
    orphaned data, for files of version 2), and a later value of a (tag, step) replaces an earlier one."""
    shown = {}
    for path in paths:
        for e in parse_events(path, event_class)[1:]:
            if e.WhichOneof("what") == "session_log":
                shown = {key: v for key, v in shown.items() if key[1] < e.step}
            for v in e.summary.value:
                shown[(v.tag, e.step)] = v
    return shown


# ---- TensorFlow's default histogram --------------------------------------------

def default_limits():
    positive, v = [], 1.0e-12
    while v < 1.0e20:
        positive.append(v)
        v *= 1.1
    positive.append(sys.float_info.max)
    return [-x for x in reversed(positive)] + [0.0] + positive


def sequential_sum(xs):
    """Left to right, as the writer adds: the same rounding."""
    total = 0.0
    for x in xs:
        total += x
    return total


def expected_histogram(xs):
    limits = default_limits()
    counts = [0.0] * len(limits)
    finite = [x for x in xs if math.isfinite(x)]
    for x in finite:
        counts[bisect.bisect_right(limits, x)] += 1
    pairs, i = [], 0
    while i < len(counts):
        end, count = limits[i], counts[i]
        i += 1
        if count <= 0:
            while i < len(counts) and counts[i] <= 0:
                end = limits[i]
                i += 1
        pairs.append((end, count))
    return {"min": min(finite, default=sys.float_info.max), "max": max(finite, default=-sys.float_info.max),
            "num": float(len(finite)), "sum": sequential_sum(finite), "sum_squares": sequential_sum(x * x for x in finite),
            "bucket_limit": [p[0] for p in pairs], "bucket": [p[1] for p in pairs]}


def float32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def brief(x):
    if isinstance(x, list) and len(x) > 6:
        return f"[{len(x)} values: {', '.join(map(repr, x[:3]))}, ...]"
    return repr(x)


def check_histogram(where, histo, xs):
    want = expected_histogram(xs)
    for key in ("min", "max", "num", "sum", "bucket_limit", "bucket"):
        got = getattr(histo, key)
        got = list(got) if key.startswith("bucket") else got
        require(got == want[key], f"{where}: {key} is {brief(got)}, expected {brief(want[key])}")
    # A compiler may fuse v * v into the addition (one rounding fewer per value): a sum of
    # positive terms, so each fused step moves it by at most an ulp of the total.
    got = histo.sum_squares
    require(math.isclose(got, want["sum_squares"], rel_tol=1e-12),
            f"{where}: sum_squares is {got!r}, expected {want['sum_squares']!r}")


# ---- modes ---------------------------------------------------------------------

def check_fixture(unit_tests, event_class, workdir):
    out = os.path.join(workdir, "fixture")
    os.makedirs(out)
    before = time.time()
    subprocess.run([unit_tests, "[.tfevents_fixture]"], check=True, env=dict(os.environ, ATTNLAB_TFEVENTS_FIXTURE=out),
                   stdout=subprocess.DEVNULL)
    after = time.time()
    with open(os.path.join(out, "expected.json")) as f:
        expected = json.load(f)
    files = glob.glob(os.path.join(out, "events.out.tfevents.*"))
    require(files == [expected["path"]], f"event files {files}, expected [{expected['path']}]")
    name = os.path.basename(files[0])
    events = parse_events(files[0], event_class)
    for e in events:
        require(math.floor(before) <= e.wall_time <= after + 1, f"{name}: wall_time {e.wall_time} outside the run")
    require(name == f"events.out.tfevents.{int(events[0].wall_time)}.attnlab", f"file name {name}")
    got = values(events)
    want = [("scalar", s) for s in expected["scalars"]] + [("histo", h) for h in expected["histograms"]]
    require(len(got) == len(want), f"{name}: {len(got)} values, expected {len(want)}")
    scalars = {(t, s): v for t, s, v in got if v.WhichOneof("value") == "simple_value"}
    histos = {(t, s): v for t, s, v in got if v.WhichOneof("value") == "histo"}
    for s in expected["scalars"]:
        v = scalars.get((s["tag"], s["step"]))
        require(v is not None, f"{name}: no scalar {s['tag']} at step {s['step']}")
        require(v.simple_value == float32(s["value"]),
                f"{name}: {s['tag']} at step {s['step']} is {v.simple_value!r}, expected float32({s['value']!r})")
    for h in expected["histograms"]:
        v = histos.get((h["tag"], h["step"]))
        require(v is not None, f"{name}: no histogram {h['tag']} at step {h['step']}")
        check_histogram(f"{name}: {h['tag']} at step {h['step']}", v.histo, h["values"])
    check_run(out, event_class)
    self_test(files[0], event_class)
    print(f"check_tfevents: {name}: {len(events)} records parse with TensorBoard's definitions, CRCs checked, "
          f"{len(scalars)} scalars and {len(histos)} histograms equal the values written")


def self_test(path, event_class):
    """The checks above can fail: a flipped bit in a length or in an event must be caught."""
    with open(path, "rb") as f:
        blob = bytearray(f.read())
    (first_len,) = struct.unpack("<Q", bytes(blob[:8]))
    for offset, what in ((0, "length"), (12 + first_len // 2, "event")):
        bad = bytearray(blob)
        bad[offset] ^= 0x04
        try:
            read_records(bytes(bad), "corrupted copy")
        except CheckFailed:
            continue
        raise CheckFailed(f"a flipped bit in the first record's {what} was not detected")
    # A scalar value written under a field number Summary.Value lacks (15) must be refused.
    records = read_records(bytes(blob), path)
    event = event_class.FromString(records[1])
    event.summary.value[0].MergeFromString(b"\x7d\x00\x00\x80\x3f")  # field 15, fixed32
    require(has_unknown_fields(event), "an unknown field in a Summary.Value was not detected")


def check_run(run, event_class):
    files = sorted(glob.glob(os.path.join(run, "events.out.tfevents.*")))
    require(files, f"{run}: no events.out.tfevents.* file")
    scalars = {key: v.simple_value for key, v in shown_values(files, event_class).items()
               if v.WhichOneof("value") == "simple_value"}
    with open(os.path.join(run, "metrics.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    checked = 0
    for row in rows:
        step = int(row["step"])
        for column, text in row.items():
            if column == "step" or text == "":
                continue
            got = scalars.get((column, step))
            require(got is not None, f"{run}: no scalar {column} at step {step} (metrics.csv has {text})")
            want = float32(float(text))
            require(got == want or (math.isnan(got) and math.isnan(want)),
                    f"{run}: scalar {column} at step {step} is {got!r}, metrics.csv has {text}")
            checked += 1
    # And nothing more: no scalar of a column at a step where metrics.csv has no value (a killed
    # attempt's rows past the checkpoint it was resumed from must not be shown).
    cells = {(column, int(row["step"])) for row in rows for column, text in row.items() if text != ""}
    columns = set(rows[0]) if rows else set()
    for tag, step in scalars:
        require(tag not in columns or (tag, step) in cells,
                f"{run}: scalar {tag} at step {step} is shown, metrics.csv has no such value")
    print(f"check_tfevents: {run}: {len(files)} event file(s) parse; {checked} metrics.csv values equal their scalars")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--protos", default=DEFAULT_PROTOS, help="root of the tensorboard/compat/proto/*.proto copies")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--unit-tests", help="the unit_tests executable (writes the fixture)")
    mode.add_argument("--run", help="a run directory with metrics.csv and event files")
    mode.add_argument("--events", help="one event file")
    args = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="attnlab-check-tfevents-")
    try:
        event_class = load_event_class(args.protos, workdir)
        if event_class is None:
            return SKIP
        if args.unit_tests:
            check_fixture(args.unit_tests, event_class, workdir)
        elif args.run:
            check_run(args.run, event_class)
        else:
            for e in parse_events(args.events, event_class):
                print(str(e).replace("\n", " "))
        return 0
    except CheckFailed as e:
        print(f"check_tfevents: FAILED: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
