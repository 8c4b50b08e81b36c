"""`otbench probe audit-tokenizer`: boundary kinds and the coverage of the one-newline mapping."""

import json

import pytest
from click.testing import CliRunner
from otbench.cli._probe import probe_group
from otbench.probe.tokens._vocab import build_vocabulary, mapping_coverage


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    pytest.importorskip("transformers")
    from otbench.probe.engines._tiny import build_tokenizer

    tok = build_tokenizer(0)
    d = tmp_path_factory.mktemp("tiny-tokenizer")
    tok.save_pretrained(str(d))
    return d, tok


def test_audit_reports_mapping_coverage(tiny_dir, tmp_path):
    d, tok = tiny_dir
    out = tmp_path / "audit.json"
    r = CliRunner().invoke(probe_group, ["audit-tokenizer", str(d), "--top", "3", "--json", str(out)])
    assert r.exit_code == 0, r.output
    # the figures come from the tokenizer as saved and reloaded
    want = mapping_coverage(build_vocabulary(tok), top=3)
    got = json.loads(out.read_text())["mapping"]
    assert got == want
    assert (got["mapped"], got["total"]) == (12, 23)   # the tiny tokenizer: see its boundary forms
    line = next(x for x in r.output.splitlines() if "one-newline token" in x)
    assert line.strip() == ("one-newline token for 12 of 23 boundary ids (52.2%): "
                            "pure 2/2, whitespace 0/1, suffix 10/20, infix 0/0")
    assert "without one: ' \\n\\n' x1" in r.output
