"""Code grading: block extraction, output comparison, stdin and functional tests in the sandbox (SPEC §3.4)."""

import os

import pytest
from otbench.probe.grading._code import (
    extract_code,
    fenced_blocks,
    lines_match,
    normalize_output,
)
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
    (fence("print(1)", "python3"), "print(1)\n"),                         # versioned tag
    (fence("print(1)", "Python"), "print(1)\n"),                          # tags are case-blind
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


# LiveCodeBench's stdout rule (lcb_runner/evaluation/testing_util.py, restated):
# strip the whole output, split at line feeds, strip each line; same line
# count; each pair equal as text or, failing that, element-wise as Decimals.
@pytest.mark.parametrize("got,expected,equal", [
    ("3\n", "3", True),             # trailing newline
    ("3  \n4\t\n", "3\n4", True),   # trailing spaces per line
    ("3\n\n\n", "3", True),         # trailing blank lines
    ("\n\n3", "3", True),           # leading blank lines
    ("3\r\n4\r\n", "3\n4", True),   # CRLF
    (" 3", "3", True),              # leading space: each line is stripped
    ("1.0 2", "1 2", True),         # numeric fallback, element by element
    ("1e3", "1000", True),          # Decimal equality is numeric
    ("-0", "0", True),
    ("3  4", "3 4", True),          # inner spacing: equal as numbers
    ("a  b", "a b", False),         # ...but not as text
    ("0.3333", "0.33333", False),   # no tolerance
    ("3\n\n4", "3\n4", False),      # an inner blank line counts
    ("3 4", "34", False),
    ("3", "3\n4", False),           # line count differs
    ("NaN", "nan", False),          # NaN equals nothing
    ("sNaN", "sNaN", True),         # equal as text (compared before numbers)
    ("sNaN 1", "sNaN 2", False),    # a signalling NaN compares as unequal, no crash
    ("Yes", "yes", False),          # no case folding
])
def test_lines_match(got, expected, equal):
    assert lines_match(got, expected) is equal


def test_normalize_output_keeps_inner_blank_lines():
    assert normalize_output("\n 3 \r\n\n4\n\n") == ["3", "", "4"]


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
    (fence("import sys\nprint(3)\nsys.exit(3)"), ADD[:1], None, Status.OK),               # SystemExit is
                                                                                           # swallowed (LCB)
    (fence("import os\nprint(3, flush=True)\nos._exit(3)"), ADD[:1], None, Status.RUNTIME_ERROR),  # a real
                                                                                           # non-zero exit
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
    (fence("def add(a, b):\n    raise SystemExit(0)"),
     [{"input": "1\n2", "output": "3"}], "add", Status.RUNTIME_ERROR),                   # no value returned
    (fence("def other(a, b):\n    return a"),
     [{"input": "1\n2", "output": "3"}], "combine", Status.RUNTIME_ERROR),                # missing function
                                                                                           # (not "add": the
                                                                                           # import block has
                                                                                           # operator.add)
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


# LiveCodeBench's execution rules, each pinned by a program that fails
# without the rule (names and limits LCB provides, comparisons it makes).
TWO_SUM = """class Solution:
    def twoSum(self, nums: List[int], target: int) -> List[int]:
        seen = {}
        for i, x in enumerate(nums):
            if target - x in seen:
                return [seen[target - x], i]
            seen[x] = i"""
LCB_RULES = [
    # the import block: typing names without an import (call-based)
    (TWO_SUM, [{"input": "[2,7,11,15]\n9", "output": "[0, 1]"},
               {"input": "[3,2,4]\n6", "output": "[1, 2]"}], "twoSum"),
    # the import block: collections, heapq, math, itertools, functools... (stdin)
    ("q = deque([2, 3])\nq.appendleft(1)\nprint(*q)", [{"input": "", "output": "1 2 3"}], None),
    ("h = [3, 1, 2]\nheapify(h)\nprint(heappop(h), gcd(12, 18), list(accumulate([1, 2])), "
     "reduce(mul, [2, 3]), bisect_left([1, 3], 2), ascii_lowercase[:2])",
     [{"input": "", "output": "1 6 [1, 3] 6 1 ab"}], None),
    ("print(datetime.date(2024, 1, 2).day, Counter('aab')['a'], sqrt(16))",
     [{"input": "", "output": "2 2 4.0"}], None),      # `datetime` is the module
    ("print(open(0).read().split()[0])", [{"input": "7 8", "output": "7"}], None),  # builtins' open
    # the raised recursion limit: depth 5000 (Python's default limit is 1000)
    ("def depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)\nprint(depth(int(input())))",
     [{"input": "5000", "output": "5000"}], None),
    ("class Solution:\n    def f(self, n: int) -> int:\n        return 0 if n == 0 else 1 + self.f(n - 1)",
     [{"input": "5000", "output": "5000"}], "f"),
    # the int->str digit limit LCB raises
    ("print(len(str(10 ** 10000)))", [{"input": "", "output": "10001"}], None),
    # stripped lines and the numeric fallback
    ("print(' 3')", [{"input": "", "output": "3"}], None),
    ("print('1.0 2')", [{"input": "", "output": "1 2"}], None),
    # __main__ guard runs
    ("def main():\n    print(5)\nif __name__ == '__main__':\n    main()", [{"input": "", "output": "5"}], None),
]


@needs_sandbox
@pytest.mark.parametrize("code,tests,fn_name", LCB_RULES)
def test_livecodebench_rules(code, tests, fn_name):
    g = grade("code", "", fence(code), tests=tests, fn_name=fn_name, config=FAST)
    assert g.correct, g


@needs_sandbox
def test_each_test_gets_its_own_time_limit():
    # Four tests of ~0.6 s each (2.4 s in all) under a 2 s per-test limit:
    # LiveCodeBench's per-test timeout passes them; one wall cap would not.
    limits = SandboxLimits(wall_s=2.0, cpu_s=2)
    code = fence("import time\nt = time.time()\nwhile time.time() - t < 0.6:\n    pass\nprint(input())")
    tests = [{"input": str(i), "output": str(i)} for i in range(4)]
    g = grade("code", "", code, tests=tests, config=GradeConfig(limits=limits))
    assert g.correct, g
    assert limits.run_deadline_s(4) == 4 * 3.0 + 10.0
    assert SandboxLimits(total_wall_s=5.0).run_deadline_s(4) == 5.0
    slow = fence("import time\ntime.sleep(float(input()))\nprint(1)")
    g = grade("code", "", slow, tests=[{"input": "0", "output": "1"}, {"input": "30", "output": "1"}],
              config=GradeConfig(limits=SandboxLimits(wall_s=1.0, cpu_s=1)))
    assert (g.status, g.detail) == (Status.TIMEOUT, "test 2 of 2: time limit")


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
    (dict(memory_bytes=128 << 20, processes=5), r"`memory_bytes` \(134217728\) shared by the "
     r"program's 4 processes leaves 33554432 bytes each; at least 67108864 \(64 MiB\) each are "
     r"needed\."),
    (dict(output_bytes=0), r"`output_bytes` must be an integer >= 1, got 0\."),
    (dict(tmpfs_bytes=True), r"`tmpfs_bytes` must be an integer >= 1048576, got True\."),
])
def test_limits_validation_messages(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SandboxLimits(**kwargs)
