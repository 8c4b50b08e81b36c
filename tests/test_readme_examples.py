"""The README's Python examples run as written (each block marked `<!-- tested: NAME -->`)."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = dict(re.findall(r"<!-- tested: ([\w-]+) -->\n```python\n(.*?)```", README.read_text(), re.S))


def test_readme_has_tested_blocks():
    assert "python-api" in BLOCKS


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_readme_block_runs(name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(BLOCKS[name], f"README.md:{name}", "exec"), {"__name__": "__readme__"})
    if name == "python-api":
        out = capsys.readouterr().out.splitlines()
        assert out[0].split() == ["model", "group", "OR", "AD"]
        assert len(out) == 1 + 12                    # 3 models x 4 groups in the small set
        assert (tmp_path / "frontiers.png").stat().st_size > 10_000
