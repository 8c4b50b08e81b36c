"""Benchmark loaders: local JSONL/Parquet/CSV files, optional Hugging Face `datasets`, embedded offline data.

Every loader returns `Question`s in one of the four reporting groups (docs/rules.md):

| benchmark | group | task | local file fields (accepted names) |
|---|---|---|---|
| MATH500 | MATH500 | math | problem (`problem`, `question`), answer (`answer`), id (`unique_id`, `id`) |
| AIME2024 / AIME2025 / AIME2026 | AIME (one pool) | math | problem (`problem`, `Problem`, `question`), answer (`answer`, `Answer`; string or integer), id (`id`, `problem_idx`, `ID`, `problem_id`, `unique_id`; string or integer; none: `text_id` of the problem) |
| GPQA-Diamond | GPQA-Diamond | choice | `Question`, `Correct Answer`, `Incorrect Answer 1..3` (or `question`, `correct_answer`, `incorrect_answers` [3 strings]), id (`Record ID`, `id`) |
| LiveCodeBench | LiveCodeBench | code | id (`question_id`, `id`), statement (`question_content`, `question`), `starter_code` (optional), tests: `tests` (list of {input, output[, testtype]}) or `public_test_cases` + `private_test_cases` (LiveCodeBench's release files: JSON text, the private ones possibly zlib/base64-packed), `fn_name` or `metadata.func_name` for functional tests, `contest_date` (optional, for date windows) |

Local files: `.jsonl` (one JSON object per line; blank lines skipped),
`.parquet` or `.csv` (a header row; GPQA's `gpqa_diamond.csv` as
distributed). Any problem stops loading with `FILE:LINE: rule` (Parquet and
CSV: `FILE:row N: rule`), lines and rows numbered from 1. Several sources
per job and group, Hub datasets and user schemas: `_sources`, `_schemas`.

Question ids are unique within a group; AIME ids are prefixed with their
year's dataset (`AIME2025-7`) so the pooled group stays unique.

GPQA options are shuffled per question with a recorded seed (see
`shuffle_order` in `_grading_choice`): the order is a function of (seed,
question id) only.

Offline default (no network): `champ_questions()` reads the MIT-licensed
CHAMP competition-math problems shipped inside the `champ-dataset` PyPI
package; the seeded generators (`sum_questions`, `arithmetic_questions`) are in `_sums`.
"""

import base64
import dataclasses
import hashlib
import io
import json
import pickle
import re
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from otbench.probe.grading import LETTERS, CodeTest, GradeRequest, shuffle_options

from ._rows import DatasetError, _field, _id, _loads, _rows, _text
from otbench.descriptors import BENCHMARK_SPECS, file_benchmarks
from otbench.errors import ArgumentError

BENCHMARKS = {s.name: s.group for s in BENCHMARK_SPECS.declared() if not s.embedded}
"""The built-in file benchmarks (dataset name -> reporting group), from their records
(`otbench.descriptors.BENCHMARK_SPECS`, which the loaders read, so one declared later counts)."""
GROUPS = tuple(dict.fromkeys(BENCHMARKS.values()))
"""Their reporting groups."""


@dataclasses.dataclass(frozen=True)
class Question:
    """One benchmark question, shared by every model.

    Attributes:
        group: reporting group ("AIME", "MATH500", "GPQA-Diamond",
            "LiveCodeBench"; the offline demo data use their own).
        dataset: source dataset ("AIME2025", "MATH500", ...).
        id: question id, unique within the group.
        task: "math" | "choice" | "code" (how answers are graded).
        text: the problem statement (for choice: the stem, options apart).
        reference: math: LaTeX answer; choice: correct letter after
            shuffling; code: "" (tests decide).
        options: choice: option texts in the order shown (letter A first).
        shuffle_seed: choice: the seed of the option order.
        tests: code: the tests, in order.
        fn_name: code: function/method to call for functional tests (None:
            stdin/stdout tests).
        starter_code: code: the signature to complete, if any.
        prompt: the whole prompt text, used as is instead of the family's
            template (an imported trace's own prompt, `prompt = "trace"`).
    """

    group: str
    dataset: str
    id: str
    task: str
    text: str
    reference: str
    options: tuple[str, ...] = ()
    shuffle_seed: int | None = None
    tests: tuple[CodeTest, ...] = ()
    fn_name: str | None = None
    starter_code: str = ""
    prompt: str | None = None

    def body(self) -> str:
        """The problem as shown to the model: statement, then lettered options or starter code."""
        if self.task == "choice":
            return self.text + "\n\n" + "\n".join(f"{LETTERS[i]}) {o}" for i, o in enumerate(self.options))
        if self.task == "code" and self.starter_code:
            return self.text + "\n\n```python\n" + self.starter_code.rstrip("\n") + "\n```"
        return self.text

    def grade_request(self, response: str) -> GradeRequest:
        """The `GradeRequest` that grades `response` to this question."""
        return GradeRequest(self.task, self.reference, response, self.tests, self.fn_name,
                            max(len(self.options), 2) if self.task == "choice" else 4)


# ---------------------------------------------------------------------------
# Row mappers: one per benchmark.


def _math500(row, loc, **_) -> Question:
    return Question("MATH500", "MATH500", _id(row, loc, ("unique_id", "id")), "math",
                    _text(row, loc, ("problem", "question")),
                    _text(row, loc, ("answer",)))


AIME_ID_FIELDS = ("id", "problem_idx", "ID", "problem_id", "unique_id")
"""AIME id columns, first present wins; a file with none gets `text_id` of the problem."""

TEXT_ID_PREFIX = "sha256-"


def text_id(text: str) -> str:
    """A stable id from a problem's text: `sha256-` + 16 hex digits of its whitespace-normalized UTF-8.

    For files that carry no id (bare question/answer AIME files): the same
    problem gets the same id in any file, order or run.
    """
    norm = " ".join(text.split())
    return TEXT_ID_PREFIX + hashlib.sha256(norm.encode("utf-8")).hexdigest()[:16]


def _aime(dataset: str):
    def mapper(row, loc, **_) -> Question:
        answer = _field(row, loc, ("answer", "Answer"), types=(str, int))
        answer = str(answer).strip()
        if not answer:
            raise DatasetError(f"{loc}: field 'answer' is empty")
        text = _text(row, loc, ("problem", "Problem", "question"))
        if any(row.get(n) is not None for n in AIME_ID_FIELDS):
            qid = _id(row, loc, AIME_ID_FIELDS)
        else:
            qid = text_id(text)
        return Question("AIME", dataset, f"{dataset}-{qid}", "math", text, answer)
    return mapper


def _gpqa(row, loc, *, seed: int = 0, **_) -> Question:
    qid = _id(row, loc, ("Record ID", "id"))
    stem = _text(row, loc, ("Question", "question"))
    if "incorrect_answers" in row:
        wrong = _field(row, loc, ("incorrect_answers",), types=(list,))
        if len(wrong) != 3 or not all(isinstance(w, str) and w.strip() for w in wrong):
            raise DatasetError(f"{loc}: field 'incorrect_answers' must hold 3 non-empty strings")
        right = _text(row, loc, ("correct_answer",))
    else:
        right = _text(row, loc, ("Correct Answer", "correct_answer"))
        wrong = [_text(row, loc, (f"Incorrect Answer {k}",)) for k in (1, 2, 3)]
    opts = [o.strip() for o in [right, *wrong]]
    if len(set(opts)) != len(opts):
        raise DatasetError(f"{loc}: options must be distinct (two options read the same)")
    s = shuffle_options(opts, 0, seed=seed, question_id=qid)
    return Question("GPQA-Diamond", "GPQA-Diamond", qid, "choice", stem.strip(), s.reference,
                    options=s.options, shuffle_seed=s.seed)


PACKED_LIMIT = 256 << 20
"""Bytes one packed test field of LiveCodeBench may inflate to (its largest are tens of MB)."""


class _NoGlobals(pickle.Unpickler):
    """Unpickler for LiveCodeBench's packed tests: plain data only, never code."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _decode_tests(v, loc: str, name: str) -> list:
    if isinstance(v, list):
        return v
    if not isinstance(v, str):
        raise DatasetError(f"{loc}: field '{name}' must be a list or a string, got {type(v).__name__}")
    if not v.strip():
        return []
    if v.lstrip()[:1] in ("[", "{"):
        return _loads(v, f"{loc}: field '{name}'")
    try:
        # LiveCodeBench's private tests: base64(zlib(pickle(JSON text))), inflated at most to the
        # limit (a small field can inflate to gigabytes: a bomb is refused, not held in memory).
        inflate = zlib.decompressobj()
        packed = inflate.decompress(base64.b64decode(v.encode("ascii")), PACKED_LIMIT + 1)
    except Exception:
        raise DatasetError(f"{loc}: field '{name}' is neither JSON nor LiveCodeBench's packed "
                           "test format") from None
    if len(packed) > PACKED_LIMIT or inflate.unconsumed_tail:
        raise DatasetError(f"{loc}: field '{name}' inflates to more than {PACKED_LIMIT} bytes; "
                           "refusing to unpack it")
    try:
        raw = _NoGlobals(io.BytesIO(packed)).load()
    except Exception:
        raise DatasetError(f"{loc}: field '{name}' is neither JSON nor LiveCodeBench's packed "
                           "test format") from None
    if not isinstance(raw, (str, bytes)):
        raise DatasetError(f"{loc}: field '{name}' is neither JSON nor LiveCodeBench's packed "
                           "test format")
    return _loads(raw, f"{loc}: field '{name}' (packed)")


def _lcb(row, loc, *, contest_dates=None, **_) -> Question | None:
    qid = _id(row, loc, ("question_id", "id"))
    if contest_dates is not None:
        date = _field(row, loc, ("contest_date",))[:10]
        if not contest_dates[0] <= date < contest_dates[1]:
            return None
    text = _text(row, loc, ("question_content", "question"))
    starter = _field(row, loc, ("starter_code",), required=False) or ""
    if "tests" in row:
        raw = _decode_tests(row["tests"], loc, "tests")
    else:
        if "public_test_cases" not in row and "private_test_cases" not in row:
            raise DatasetError(f"{loc}: missing field 'tests' (also accepted: "
                               "'public_test_cases' + 'private_test_cases')")
        raw = []
        for name in ("public_test_cases", "private_test_cases"):
            if row.get(name) is not None:
                raw += _decode_tests(row[name], loc, name)
    if not raw:
        raise DatasetError(f"{loc}: no tests")
    tests, kinds = [], set()
    for k, t in enumerate(raw):
        if not isinstance(t, Mapping) or not isinstance(t.get("input"), str) \
                or not isinstance(t.get("output"), str):
            raise DatasetError(f"{loc}: test {k + 1} must be an object with string 'input' and 'output'")
        kinds.add(t.get("testtype", "stdin"))
        tests.append(CodeTest(t["input"], t["output"]))
    if not kinds <= {"stdin", "functional"} or len(kinds) != 1:
        raise DatasetError(f"{loc}: tests must all be 'stdin' or all 'functional', got {sorted(kinds)}")
    fn_name = _field(row, loc, ("fn_name",), required=False)
    if fn_name is None and row.get("metadata") is not None:
        meta = row["metadata"]
        meta = _loads(meta, f"{loc}: field 'metadata'") if isinstance(meta, str) else meta
        fn_name = meta.get("func_name") if isinstance(meta, Mapping) else None
    if kinds == {"functional"}:
        if not isinstance(fn_name, str) or not fn_name.isidentifier():
            raise DatasetError(f"{loc}: functional tests need 'fn_name' (or metadata.func_name)")
        if fn_name.startswith("__"):
            raise DatasetError(f"{loc}: fn_name {fn_name!r} must be a plain name (no leading "
                               f"double underscore)")
    else:
        fn_name = None
    return Question("LiveCodeBench", "LiveCodeBench", qid, "code", text, "", tests=tuple(tests),
                    fn_name=fn_name, starter_code=starter)


# The row loaders the benchmark records name (`BenchmarkSpec.loader`).
_aime2024, _aime2025, _aime2026 = _aime("AIME2024"), _aime("AIME2025"), _aime("AIME2026")


def row_mapper(benchmark: str) -> Callable[..., "Question | None"]:
    """The row loader of a file benchmark (`BenchmarkSpec.loader`, imported now)."""
    names = file_benchmarks()
    if not isinstance(benchmark, str) or benchmark not in names:
        raise ArgumentError(f"`benchmark` must be one of {', '.join(map(repr, names))}, got {benchmark!r}.")
    BENCHMARK_SPECS[benchmark]         # an installed benchmark's record, read now, registers its loader
    return BENCHMARK_SPECS.targets.resolve(benchmark)


def _map_rows(benchmark: str, rows: Iterable[tuple[str, Any]], **kw) -> list[Question]:
    mapper, grader = row_mapper(benchmark), BENCHMARK_SPECS[benchmark].grader

    def graded(row, loc, **kw):
        q = mapper(row, loc, **kw)
        if q is not None and q.task != grader:    # a loader out of step with its record
            raise DatasetError(f"{loc}: the {benchmark} loader gave a {q.task!r} question, but its "
                               f"record grades {grader!r} answers")
        return q

    return map_unique(graded, rows, **kw)


def map_unique(mapper: Callable[..., "Question | None"], rows: Iterable[tuple[str, Any]],
               **kw) -> list[Question]:
    """`mapper(row, loc, **kw)` over `(loc, row)` pairs: None skips a row, a repeated id is refused."""
    out, seen = [], {}
    for loc, row in rows:
        q = mapper(row, loc, **kw)
        if q is None:
            continue
        if q.id in seen:
            raise DatasetError(f"{loc}: duplicate question id {q.id!r} (first at {seen[q.id]})")
        seen[q.id] = loc
        out.append(q)
    return out


def load_benchmark(benchmark: str, path: str, *, seed: int = 0,
                   contest_dates: tuple[str, str] | None = None) -> list[Question]:
    """Load one benchmark from a local JSONL or Parquet file (schemas in the module docstring).

    Args:
        benchmark: "MATH500", "AIME2024", "AIME2025", "AIME2026",
            "GPQA-Diamond" or "LiveCodeBench".
        path: a `.jsonl` or `.parquet` file.
        seed: GPQA option-shuffling seed (recorded in each question).
        contest_dates: LiveCodeBench only: keep questions with
            `start <= contest_date < end` (ISO dates, "2024-08-01").

    Raises:
        DatasetError: `FILE:LINE: rule` for the first bad record.
    """
    return _map_rows(benchmark, _rows(path), seed=seed, contest_dates=contest_dates)


def load_group(files: Mapping[str, str] | Sequence[tuple[str, str]], **kw) -> list[Question]:
    """Load several benchmark files and pool them by reporting group.

    `files` maps benchmark -> path, or is a sequence of (benchmark, path)
    pairs when one benchmark comes in several files (AIME 2025 I and II).
    E.g. `{"AIME2024": a, "AIME2025": b, "AIME2026": c}` gives the one AIME
    group. Ids must stay unique within each group across files.
    """
    pairs = list(files.items()) if isinstance(files, Mapping) else list(files)
    out, seen = [], {}
    for benchmark, path in pairs:
        for q in load_benchmark(benchmark, path, **kw):
            key = (q.group, q.id)
            if key in seen:
                raise DatasetError(f"{path}: question id {q.id!r} of group {q.group} also in {seen[key]}")
            seen[key] = path
            out.append(q)
    return out


HUB = {s.name: s.hub for s in BENCHMARK_SPECS.declared() if s.hub is not None}
"""The built-in default hub locations (`BenchmarkSpec.hub`); override `name` / `config` /
`split` if they move."""


def load_hub(benchmark: str, *, name: str | None = None, config: str | None = None,
             split: str | None = None, revision: str | None = None, seed: int = 0,
             contest_dates: tuple[str, str] | None = None, **load_kwargs) -> list[Question]:
    """Load a benchmark through Hugging Face `datasets` (needs network; `datasets` imported here).

    Rows go through the same schema checks as local files. Pin `revision`
    for reproducible runs. AIME2026 has no default location: pass `name`.
    """
    if name is None:
        spec = BENCHMARK_SPECS[benchmark] if isinstance(benchmark, str) and benchmark in BENCHMARK_SPECS \
            else None
        if spec is None or spec.hub is None:
            raise ArgumentError(f"no default hub location for {benchmark!r}; pass `name`.")
        name, d_config, d_split = spec.hub
        config = config if config is not None else d_config
        split = split if split is not None else d_split
    try:
        import datasets
    except ImportError:
        raise ImportError("load_hub needs the `datasets` package: pip install datasets", name="datasets") from None
    ds = datasets.load_dataset(name, config, split=split or "train", revision=revision, **load_kwargs)
    label = f"{name}[{split}]"
    return _map_rows(benchmark, ((f"{label}:row {i}", row) for i, row in enumerate(ds, 1)),
                     seed=seed, contest_dates=contest_dates)


# ---------------------------------------------------------------------------
# Offline default data.

_CHAMP_NUMBER = re.compile(r"\A(?:@@)?\s*(-?\d+)(?:\s*/\s*(\d+))?\s*(?:@@)?\Z")


def champ_questions(group: str = "CHAMP") -> list[Question]:
    """The CHAMP problems (MIT license, `champ-dataset` package) whose answer is a number.

    CHAMP answers are free text ("At least 1 number", "@@2^(n-1)@@"); only the
    ones that are a plain integer or fraction are kept, so math-verify can
    grade them exactly (a fraction `a/b` becomes `\\frac{a}{b}`). Text and answers
    drop CHAMP's `@@` math markers. Read from the installed package; no network.
    """
    from importlib import resources

    try:
        src = resources.files("champ_dataset") / "dataset_files" / "v0.json"
    except ModuleNotFoundError:
        raise ImportError("the offline default data need the `champ-dataset` package: "
                          "pip install champ-dataset", name="champ_dataset") from None
    with src.open("r", encoding="utf-8") as f:
        problems = json.load(f)["problems"]
    out = []
    for pid, p in problems.items():
        m = _CHAMP_NUMBER.match(p.get("_raw_answer") or "")
        if not m:
            continue
        num, den = m.groups()
        ref = num if den is None else f"\\frac{{{num}}}{{{den}}}"
        text = (p.get("_raw_text") or "").replace("@@", "").strip()
        if text:
            out.append(Question(group, "CHAMP", pid, "math", text, ref))
    return out
