"""Read a W&B offline run back: the records of its `run-<id>.wandb` file.

wandb no longer ships a Python reader of its transaction log, so this restates
the format from wandb's former `wandb/sdk/internal/datastore.py` (the LevelDB
log format): a 7-byte header (`:W&B`, magic 0xBEE1, version 0), then 32 KiB
blocks of records, each `crc32 (uint32 LE) | length (uint16 LE) | type (uint8)`
followed by `length` bytes, the type FULL=1, FIRST=2, MIDDLE=3, LAST=4 (a
payload split across blocks); fewer than 7 bytes left in a block are padding.
Each payload is one `wandb.proto.wandb_internal_pb2.Record` (the library's own
protobuf). Checksums are verified, so a misread fails instead of passing.
"""

import json
import struct
import zlib
from pathlib import Path

_BLOCK = 32768
_HEADER = 7


def records(path: Path):
    """The `Record` messages of a `.wandb` file, in order."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    ident, magic, version = struct.unpack("<4sHB", data[:_HEADER])
    assert (ident, magic, version) == (b":W&B", 0xBEE1, 0), (ident, hex(magic), version)
    pos, buf, out = _HEADER, b"", []
    while pos + _HEADER <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _HEADER:
            pos += left
            continue
        crc, length, typ = struct.unpack("<IHB", data[pos:pos + _HEADER])
        if typ == 0 and length == 0:              # zero padding to the block's end
            pos += left
            continue
        chunk = data[pos + _HEADER:pos + _HEADER + length]
        assert zlib.crc32(bytes([typ]) + chunk) & 0xFFFFFFFF == crc, f"bad checksum at {pos}"
        pos += _HEADER + length
        if typ == 1:
            out.append(chunk)
        elif typ == 2:
            buf = chunk
        elif typ == 3:
            buf += chunk
        elif typ == 4:
            out.append(buf + chunk)
    for payload in out:
        rec = pb.Record()
        rec.ParseFromString(payload)
        yield rec


def run_contents(path: Path) -> dict:
    """The run's name and project, its config and its (flat) summary, decoded from JSON."""
    got = {"config": {}, "summary": {}}
    for rec in records(path):
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            got["name"], got["project"] = rec.run.display_name, rec.run.project
            got["config"] |= {u.key: json.loads(u.value_json) for u in rec.run.config.update}
        elif kind == "config":
            got["config"] |= {u.key: json.loads(u.value_json) for u in rec.config.update}
        elif kind == "summary":
            got["summary"] |= {u.key: json.loads(u.value_json) for u in rec.summary.update
                               if u.key and not u.nested_key}
    return got
