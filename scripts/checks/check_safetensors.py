#!/usr/bin/env python3
"""Interoperability of attnlab's safetensors files with an independent implementation.

The format is coded here by hand from its specification with numpy (the
`safetensors` package is not needed):

    /usr/bin/python3 scripts/checks/check_safetensors.py --write tests/data/io_python_written.safetensors
        writes the fixture that tests/test_io.cpp reads: F32 and F64 tensors, a 0-d
        and an empty tensor, metadata, header keys in a different order than the
        data, the header padded with spaces.
    /usr/bin/python3 scripts/checks/check_safetensors.py --read FILE [--expect-pattern]
        reads a file written by attnlab, checks its layout strictly (8-byte
        little-endian length, JSON header, F32, offsets tiling the data in order,
        8-byte aligned data) and prints the tensors; with --expect-pattern also
        checks the values written by the pattern described in pattern_tensors().
Exit status 0 when every check passes.
"""
import argparse
import json
import struct
import sys

import numpy as np

from attnlab_runs.safetensors import read


def write(path):
    # Data order: c.f64, b.matrix, a.scalar, empty; header keys sorted, so they differ.
    tensors = [
        ("c.f64", np.array([0.1, -2.5, 1e-300, 3.0], dtype="<f8")),
        ("b.matrix", (np.arange(6, dtype="<f4").reshape(2, 3) * 0.25 - 0.5).astype("<f4")),
        ("a.scalar", np.array(-1.75, dtype="<f4")),
        ("empty", np.zeros((0, 3), dtype="<f4")),
    ]
    header = {"__metadata__": {"format": "pt", "note": "written by numpy, by hand"}}
    data = b""
    for name, arr in tensors:
        dtype = "F64" if arr.dtype == np.dtype("<f8") else "F32"
        raw = arr.tobytes(order="C")
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(dict(sorted(header.items())), separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
    print(f"wrote {path}: " + ", ".join(f"{n} {a.dtype} {list(a.shape)}" for n, a in tensors))


def pattern_tensors():
    """What the attnlab side of the check writes (see the report of the io helper)."""
    return {
        "layer.weight": (np.arange(12, dtype=np.float64).reshape(3, 4) / 8 - 0.75).astype("<f4"),
        "layer.bias": np.array([1.5, -2.0, 0.125], dtype="<f4"),
        "step": np.array(42.0, dtype="<f4"),
        "nothing": np.zeros((2, 0), dtype="<f4"),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--write")
    ap.add_argument("--read")
    ap.add_argument("--expect-pattern", action="store_true")
    args = ap.parse_args()
    if not args.write and not args.read:
        ap.print_help()
        return 2
    if args.write:
        write(args.write)
    if args.read:
        tensors, metadata, order = read(args.read)
        print(f"read {args.read}: header order {order}, metadata {metadata}")
        for name, arr in tensors.items():
            print(f"  {name} {list(arr.shape)} {arr.reshape(-1)[:6].tolist()}")
        if args.expect_pattern:
            expected = pattern_tensors()
            assert list(tensors.keys()) == list(expected.keys()), (list(tensors), list(expected))
            assert order == list(expected.keys()), f"header order {order}"
            for name, arr in expected.items():
                assert tensors[name].shape == arr.shape, (name, tensors[name].shape, arr.shape)
                assert np.array_equal(tensors[name], arr), name
            assert metadata == {"arch": "encoder", "step": "42"}, metadata
            print("pattern and metadata match exactly")
    return 0


if __name__ == "__main__":
    sys.exit(main())
