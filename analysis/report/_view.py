"""`write_view`: trajectories of a measurement set as a person reads them, in one HTML file.

For each shown trajectory: its thinking text cut at every step boundary
(where the set stores token ids and a tokenizer reads them), at each cut the
P forced answers with their verdicts (from the probe's `probes` table; the
count C(k) of P where the set has none), the signals recorded there, the
accuracy curve C(k)/P over retained tokens, and where each OTBench method
stopped: every registered method that runs on the set, fit and walked by
`otbench.analysis.bench.sweep_stops` (the evaluator's own fit and walk) at up
to `POINTS` θs of its default sweep. An index links every trajectory, grouped by
model and question.

The file stands alone: inline CSS, one small inline script (an index filter),
inline SVG, no network; everything the set holds is escaped (`_view_page`).
Its size is bounded by `limit` (default `DEFAULT_LIMIT` trajectories); the
page says how many matching trajectories were left out.
"""

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from otbench.analysis.measurement import MeasurementSet

from . import _view_data as data
from ._view_data import Decode, ViewError
from ._view_page import page

DEFAULT_LIMIT = 20
"""Trajectories a view shows unless told otherwise (a paper-scale trajectory's text is ~100 KB)."""
POINTS = 5
"""θs of each method's sweep at which its stop is shown (first, last and evenly between)."""


def _source(ms_or_dir: Any, set_dir: Any) -> tuple[MeasurementSet, Path | None]:
    if isinstance(ms_or_dir, MeasurementSet):
        return ms_or_dir, None if set_dir is None else Path(set_dir)
    if isinstance(ms_or_dir, (str, os.PathLike)):
        from otbench.analysis.measurement import load

        return load(ms_or_dir), Path(ms_or_dir)
    raise ViewError(f"`ms_or_dir` must be a MeasurementSet or a directory, got "
                    f"{type(ms_or_dir).__name__}")


def view_html(ms_or_dir: MeasurementSet | str | os.PathLike, *, model: str | None = None,
              question: str | None = None, trajectory: int | None = None,
              limit: int | None = DEFAULT_LIMIT, methods: Sequence[Any] | None = None,
              tokenizer: str | os.PathLike | None = None, decode: Decode | None = None,
              set_dir: str | os.PathLike | None = None, rows: Sequence[int] | None = None) -> str:
    """The view page as text (see `write_view` for the arguments; `rows`: show exactly these
    rows of the set instead of choosing by filters and limit -- the report shows its figures'
    trajectories this way)."""
    if tokenizer is not None and decode is not None:
        raise ViewError("pass at most one of `tokenizer` and `decode`")
    ms, sdir = _source(ms_or_dir, set_dir)
    where = "the set" if sdir is None else str(sdir)
    if rows is None:
        rows, matched = data.select_rows(ms, model=model, question=question,
                                         trajectory=trajectory, limit=limit, where=where)
    else:
        rows = np.unique(np.asarray(rows, dtype=np.int64).reshape(-1))
        if rows.size == 0 or rows[0] < 0 or rows[-1] >= ms.num_trajectories:
            raise ViewError(f"`rows` must be rows of the set (0..{ms.num_trajectories - 1}), "
                            "at least one")
        matched = int(rows.size)
    how = "the caller's decoder" if decode is not None else None
    if tokenizer is not None:
        prov = ms.provenance if isinstance(ms.provenance, dict) else {}
        recorded = prov.get("tokenizer_hash")
        recorded = recorded if isinstance(recorded, str) else None
        decode, how = data.tokenizer_decoder(tokenizer, recorded)
    texts = data.read_texts(ms, rows, sdir, decode)
    stops, notes, ms = data.method_stops(ms, rows, methods, POINTS)
    left = matched - rows.size
    meta = [("set", "in memory" if sdir is None else sdir.name),
            ("shown", f"{rows.size:,} of {matched:,} matching trajectories"
                      + (f" ({left:,} left out by the limit of {limit}; narrow the choice with "
                         "--model, --question, --trajectory or raise --limit)" if left else "")),
            ("filters", ", ".join(f"{k} = {v}" for k, v in (
                ("model", model), ("question", question), ("trajectory", trajectory))
                if v is not None) or "none"),
            ("text", texts.source + (f"; {how}" if how else "")),
            ("methods", f"stops at up to {POINTS} θs of each method's default sweep, fit on the "
                        "train and validation splits (a train or validation trajectory's stop is "
                        "in-sample); docs/rules.md")]
    title = "otbench trajectories" + (" [SYNTHETIC DATA]" if ms.synthetic else "")
    return page(title=title, synthetic=bool(ms.synthetic), meta=meta, notes=notes, ms=ms,
                rows=rows.tolist(), texts=texts, stops=stops)


def write_view(ms_or_dir: MeasurementSet | str | os.PathLike, out: str | os.PathLike, *,
               model: str | None = None, question: str | None = None,
               trajectory: int | None = None, limit: int | None = DEFAULT_LIMIT,
               methods: Sequence[Any] | None = None, tokenizer: str | os.PathLike | None = None,
               decode: Decode | None = None, set_dir: str | os.PathLike | None = None,
               overwrite: bool = False) -> Path:
    """Write the trajectory view of a set to the HTML file `out`; return its path.

    Args:
      ms_or_dir: a measurement set directory (its `tokens` / `probes` tables give
        the text and answers) or a loaded `MeasurementSet`.
      out: the HTML file, written atomically; never on or inside an input, and
        a file otbench did not write is replaced only with `overwrite`.
      model, question, trajectory: show only the trajectories of that model id,
        question id, trajectory index (each optional; they combine).
      limit: at most this many trajectories (None: all that match); the page
        says how many matching ones it left out.
      methods: method names or objects whose stops are shown (default: every
        registered method that runs on the set).
      tokenizer: a local tokenizer folder (``tokenizer.json``) to read the ids as text.
      decode: instead of `tokenizer`, a function ids -> text.
      set_dir: the folder an in-memory set was loaded from (for its token tables).
      overwrite: replace an existing `out` that otbench did not write.

    Raises:
      ViewError: a filter matches nothing, a bad `limit`, an unreadable tokenizer.
      MeasurementSetError: the set or one of its tables cannot be read.
      UnsafeOutputError: `out` breaks the output rule.
    """
    from otbench.files import check_output, write_text_atomic

    inputs = [p for p in (ms_or_dir, set_dir, tokenizer) if isinstance(p, (str, os.PathLike))]
    check_output(out, *inputs, overwrite=overwrite)      # before any work
    text = view_html(ms_or_dir, model=model, question=question, trajectory=trajectory,
                     limit=limit, methods=methods, tokenizer=tokenizer, decode=decode,
                     set_dir=set_dir)
    write_text_atomic(out, text, inputs=inputs, overwrite=overwrite)
    return Path(out)
