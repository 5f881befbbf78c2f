"""A safetensors file's tensors, read with numpy from the format's specification (no `safetensors`
package), its layout checked strictly: 8-byte little-endian length, JSON header, F32, offsets tiling
the data in order, 8-byte aligned data. scripts/checks/check_safetensors.py checks attnlab's files
with it; scripts/pytorch/attnlab_torch.py loads checkpoints with it."""
import json
import struct

import numpy as np

DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8")}


def read(path):
    """(tensors {name: array}, metadata, header order) of the file; AssertionError when its layout is off."""
    raw = open(path, "rb").read()
    assert len(raw) >= 8, "shorter than 8 bytes"
    (n,) = struct.unpack("<Q", raw[:8])
    assert 8 + n <= len(raw), "header length beyond the file"
    assert n % 8 == 0, f"header length {n} is not a multiple of 8 (data not aligned)"
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    metadata = header.pop("__metadata__", {})
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()), "metadata not str->str"
    cursor = 0
    out = {}
    for name, spec in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
        assert spec["dtype"] == "F32", f"{name}: attnlab writes F32, got {spec['dtype']}"
        begin, end = spec["data_offsets"]
        assert begin == cursor, f"{name}: gap or overlap at {begin}, expected {cursor}"
        dtype = DTYPES[spec["dtype"]]
        count = int(np.prod(spec["shape"], dtype=np.int64))
        assert end - begin == count * dtype.itemsize, f"{name}: {end - begin} bytes for shape {spec['shape']}"
        out[name] = np.frombuffer(data[begin:end], dtype=dtype).reshape(spec["shape"])
        cursor = end
    assert cursor == len(data), f"{len(data) - cursor} trailing bytes"
    order = list(header.keys())
    return out, metadata, order
