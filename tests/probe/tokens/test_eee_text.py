"""`otbench export --format eee --tokenizer DIR`: a probe set's token ids as the records' text."""

import json

import numpy as np
import pyarrow as pa
import pytest
from _bad_input import cli, refused
from otbench.analysis import from_ragged, ragged, save


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    pytest.importorskip("transformers")
    from otbench.probe.engines._tiny import build_tokenizer

    tok = build_tokenizer(0)
    d = tmp_path_factory.mktemp("tiny-tokenizer")
    tok.save_pretrained(str(d))
    return d, tok


def _set(tok, folder):
    """A two-trajectory set with the probe's tokens table, its ids the tokenizer's own."""
    think = ["two plus two is four", "two plus two is"]
    answers = ["four", ""]
    enc = [tok.encode(t, add_special_tokens=False) for t in think]
    ms = from_ragged(model=["m", "m"], group=["g", "g"], question=["q", "q"],
                     trajectory=np.array([0, 1]), probes=np.array([2, 2]),
                     L=ragged([[0, len(enc[0])], [0, len(enc[1])]], np.int64),
                     C=ragged([[0, 2], [1, 1]], np.int64), y=np.array([1, 0]),
                     finished=np.array([True, False]))
    ids = pa.list_(pa.int32())
    tokens = pa.table({"model": ["m", "m"], "group": ["g", "g"], "question": ["q", "q"],
                       "trajectory": pa.array([0, 1], pa.int32()),
                       "prompt": pa.array([[1, 2, 3], [1, 2, 3]], ids), "thinking": pa.array(enc, ids),
                       "answer": pa.array([tok.encode(a, add_special_tokens=False) for a in answers], ids)})
    save(ms, folder, extra_tables={"tokens": tokens})
    return think, answers


def test_records_carry_the_decoded_text(tiny_dir, tmp_path):
    d, tok = tiny_dir
    think, answers = _set(tok, tmp_path / "set")
    r = cli("export", tmp_path / "set", "--format", "eee", "--tokenizer", d, "--out", tmp_path / "r.jsonl")
    assert r.exit_code == 0, r.output
    recs = [json.loads(line) for line in open(tmp_path / "r.jsonl")]
    # the tokenizer's decode of its own encoding (it may space words its own way)
    assert [r["output"]["reasoning_trace"] for r in recs] == [
        [tok.decode(tok.encode(t, add_special_tokens=False), skip_special_tokens=True)] for t in think]
    assert [r["output"]["raw"] for r in recs] == [
        [tok.decode(tok.encode(a, add_special_tokens=False), skip_special_tokens=True)] for a in answers]
    assert recs[0]["output"]["reasoning_trace"] == ["two plus two is four"]
    assert recs[0]["token_usage"]["reasoning_tokens"] == len(tok.encode(think[0], add_special_tokens=False))


def test_tokenizer_refusals(tiny_dir, tmp_path):
    d, tok = tiny_dir
    _set(tok, tmp_path / "set")
    refused(cli("export", tmp_path / "set", "--tokenizer", d, "--out", tmp_path / "r.jsonl"),
            "--tokenizer applies to --format eee")
    save(from_ragged(model=["m"], group=["g"], question=["q"], trajectory=np.array([0]),
                     probes=np.array([1]), L=ragged([[0, 3]], np.int64), C=ragged([[0, 1]], np.int64),
                     y=np.array([1])), tmp_path / "plain")
    refused(cli("export", tmp_path / "plain", "--format", "eee", "--tokenizer", d, "--out", tmp_path / "p.jsonl"),
            "--tokenizer needs the set's tokens table")
    (tmp_path / "empty").mkdir()
    refused(cli("export", tmp_path / "set", "--format", "eee", "--tokenizer", tmp_path / "empty",
                "--out", tmp_path / "e.jsonl"), "no tokenizer could be read there")
