"""Code grading: block extraction, output comparison, stdin and functional tests in the sandbox (SPEC §3.4)."""

import os

import pytest
from otbench.probe.grading._code import extract_code, fenced_blocks, normalize_output
from otbench.probe.grading._grade import GradeConfig, grade
from otbench.probe.grading._sandbox import SandboxLimits, sandbox_status
from otbench.probe.grading._types import Status

_WHY = sandbox_status()
# On CI (CI=true) a missing sandbox fails these tests instead of skipping them.
needs_sandbox = pytest.mark.skipif(bool(_WHY) and not os.environ.get("CI"),
                                   reason=f"sandbox unavailable here: {_WHY}")
FAST = GradeConfig(limits=SandboxLimits(wall_s=2.0, cpu_s=2, total_wall_s=20.0))


def fence(code: str, lang: str = "python") -> str:
    return f"Here is my solution.\n```{lang}\n{code}\n```\n"


# (text, expected code or None)
EXTRACT = [
    (fence("print(1)"), "print(1)\n"),                                    # tagged python
    (fence("print(1)", ""), "print(1)\n"),                                # untagged block
    (fence("print(1)", "py"), "print(1)\n"),                              # short tag
    (fence("print(1)") + fence("print(2)"), "print(2)\n"),               # final block wins
    (fence("print(1)") + fence("3", "text"), "print(1)\n"),              # shown output skipped
    (fence("int main(){}", "cpp"), None),                                 # not Python
    ("```python\nprint(1)\n", None),                                      # unclosed: truncated
    (fence("print(1)") + "```python\nprint(2)", "print(1)\n"),           # truncated last block
    ("no code", None),                                                    # nothing
    ("  ```python\n  x = 1\n  ```", "  x = 1\n"),                         # indented fences
]


@pytest.mark.parametrize("text,expected", EXTRACT)
def test_extract_code(text, expected):
    assert extract_code(text) == expected


def test_fenced_blocks_reports_tags():
    assert fenced_blocks(fence("a", "Python") + fence("b", "bash")) == [("python", "a\n"), ("bash", "b\n")]


@pytest.mark.parametrize("a,b,equal", [
    ("3\n", "3", True),             # trailing newline
    ("3  \n4\t\n", "3\n4", True),   # trailing spaces per line
    ("3\n\n\n", "3", True),         # trailing blank lines
    ("3\r\n4\r\n", "3\n4", True),   # CRLF
    (" 3", "3", False),             # leading space matters
    ("3\n\n4", "3\n4", False),      # an inner blank line matters
    ("3 4", "3  4", False),         # inner spacing matters
])
def test_normalize_output(a, b, equal):
    assert (normalize_output(a) == normalize_output(b)) is equal


ADD = [{"input": "1 2\n", "output": "3\n"}, {"input": "10 -4\n", "output": "6"}]


# (response, tests, fn_name, status)
CASES = [
    (fence("a, b = map(int, input().split())\nprint(a + b)"), ADD, None, Status.OK),        # correct
    (fence("a, b = map(int, input().split())\nprint(a - b)"), ADD, None, Status.WRONG_ANSWER),  # wrong
    (fence("import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b, end='   \\n\\n')"),
     ADD, None, Status.OK),                                                                # trailing ws ok
    (fence("print(int(input()) + )"), ADD, None, Status.PARSE_ERROR),                      # syntax error
    (fence("raise ValueError('boom')"), ADD, None, Status.RUNTIME_ERROR),                  # exception
    (fence("import sys\nprint(3)\nsys.exit(0)"), ADD[:1], None, Status.OK),               # exit(0) is fine
    (fence("import sys\nsys.exit(3)"), ADD, None, Status.RUNTIME_ERROR),                   # non-zero exit
    (fence("print(3)\nexit()"), ADD[:1], None, Status.OK),                                 # exit() builtin
    (fence("print(3)\nquit(0)"), ADD[:1], None, Status.OK),                                # quit() builtin
    ("no code at all", ADD, None, Status.NO_ANSWER),                                       # no block
    ("<think>" + fence("print(3)") + "</think>I give up.", ADD, None, Status.NO_ANSWER),  # code in thinking
    (fence("print('x' * (3 << 20))"), ADD, None, Status.OUTPUT_LIMIT),                     # 3 MiB > 1 MiB cap
    (fence("class Solution:\n    def add(self, a, b):\n        return a + b"),
     [{"input": "1\n2", "output": "3"}, {"input": "[1]\n[2]", "output": "[1, 2]"}], "add", Status.OK),
    (fence("def add(a, b):\n    print('noise')\n    return [a, b]"),
     [{"input": "1\n2", "output": "[1, 2]"}], "add", Status.OK),                          # plain function,
                                                                                           # prints ignored
    (fence("def add(a, b):\n    return (a, b)"),
     [{"input": "1\n2", "output": "[1, 2]"}], "add", Status.OK),                          # tuple == list in JSON
    (fence("class Solution:\n    def add(self, a, b):\n        return a - b"),
     [{"input": "1\n2", "output": "3"}], "add", Status.WRONG_ANSWER),                     # wrong value
    (fence("def other(a, b):\n    return a"),
     [{"input": "1\n2", "output": "3"}], "add", Status.RUNTIME_ERROR),                    # missing function
    (fence("def add(a, b):\n    return a"),
     [{"input": "1\n2", "output": "not json"}], "add", Status.REFERENCE_ERROR),           # bad expected
    (fence("def add(a, b):\n    return a"),
     [{"input": "1\nnot json", "output": "1"}], "add", Status.REFERENCE_ERROR),           # bad argument line
]


@needs_sandbox
@pytest.mark.parametrize("response,tests,fn_name,status", CASES)
def test_grade_code(response, tests, fn_name, status):
    limits = SandboxLimits(wall_s=2.0, cpu_s=2, total_wall_s=20.0, output_bytes=1 << 20)
    g = grade("code", "", response, tests=tests, fn_name=fn_name, config=GradeConfig(limits=limits))
    assert (g.correct, g.status) == (status is Status.OK, status), g


@needs_sandbox
def test_stops_at_first_failing_test(tmp_path):
    # Test 2 fails; test 3 would sleep past the total limit if it ran.
    code = fence("import time\nn = int(input())\nif n == 3: time.sleep(30)\nprint(n)")
    tests = [{"input": "1", "output": "1"}, {"input": "2", "output": "0"}, {"input": "3", "output": "3"}]
    g = grade("code", "", code, tests=tests, config=FAST)
    assert g.status is Status.WRONG_ANSWER
    assert g.detail == "test 2 of 3: wrong output"


@needs_sandbox
def test_fresh_state_per_test():
    # Files written by one test are visible to the next (same /tmp), but
    # module state is not: each test is a fresh process.
    code = fence("import builtins\nprint(getattr(builtins, 'seen', 0))\nbuiltins.seen = 1")
    g = grade("code", "", code, tests=[{"input": "", "output": "0"}] * 3, config=FAST)
    assert g.status is Status.OK


def test_missing_bwrap_is_sandbox_error(tmp_path):
    # No isolation tool: the program must not run at all.
    marker = tmp_path / "ran"
    code = fence(f"open({str(marker)!r}, 'w').write('x')\nprint(3)")
    g = grade("code", "", code, tests=[{"input": "", "output": "3"}],
              config=GradeConfig(bwrap=str(tmp_path / "no-such-bwrap")))
    assert (g.correct, g.status) == (False, Status.SANDBOX_ERROR)
    assert "apt-get install -y bubblewrap" in g.detail
    assert not marker.exists()


@pytest.mark.parametrize("kwargs,match", [
    (dict(wall_s=0), r"`wall_s` must be a positive number of seconds, got 0\."),
    (dict(total_wall_s=float("nan")), r"`total_wall_s` must be a positive number of seconds, got nan\."),
    (dict(cpu_s=1.5), r"`cpu_s` must be an integer >= 1, got 1\.5\."),
    (dict(memory_bytes=1 << 20), r"`memory_bytes` must be an integer >= 67108864, got 1048576\."),
    (dict(processes=3), r"`processes` must be an integer >= 4, got 3\."),
    (dict(output_bytes=0), r"`output_bytes` must be an integer >= 1, got 0\."),
    (dict(tmpfs_bytes=True), r"`tmpfs_bytes` must be an integer >= 1048576, got True\."),
])
def test_limits_validation_messages(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SandboxLimits(**kwargs)
