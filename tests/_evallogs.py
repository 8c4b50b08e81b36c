"""Evaluation logs written by their own frameworks, offline (tests of the log readers and the audit).

inspect-ai writes its `.eval` log with its mock model; lighteval's details are built as its
`Detail` records and written by its `EvaluationTracker.save_details` (its `DetailsLogger.log`
hashes `str`s, which the pinned xxhash 4.x refuses); without lighteval the same Parquet layout
is written with `datasets`.
"""

from pathlib import Path

import pytest


def inspect_log(tmp_path: Path, questions, replies, stops=None) -> Path:
    """An inspect-ai `.eval` log written by inspect-ai with its mock model (offline)."""
    inspect_ai = pytest.importorskip("inspect_ai", reason="inspect-ai is not installed")
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate

    outs = []
    for text, stop in zip(replies, stops or ["stop"] * len(replies)):
        o = ModelOutput.from_content("mockllm/model", text, stop_reason=stop)
        # usage given: the mock model would otherwise count tokens with a tokenizer it downloads
        o.usage = ModelUsage(input_tokens=8, output_tokens=len(text.split()), total_tokens=8 + len(text.split()))
        outs.append(o)
    task = inspect_ai.Task(dataset=[Sample(input=q.text, target=q.reference, id=q.id) for q in questions],
                           solver=generate(), scorer=match(numeric=True), name="sums")
    (log,) = inspect_ai.eval(task, model=get_model("mockllm/model", custom_outputs=outs),
                             log_dir=str(tmp_path / "inspect"), display="none", max_samples=1)
    assert log.status == "success"
    return Path(log.location)


def lighteval_details(tmp_path: Path, rows: list[dict], model="org/model", task="lighteval|sums|0") -> Path:
    """A lighteval details Parquet file: lighteval's own writer when installed, else its layout.

    lighteval's `DetailsLogger.log` hashes `str`s, which the pinned xxhash (4.x) refuses, so the
    details are built as its `Detail` records and written by its `EvaluationTracker.save_details`.
    """
    date = "2026-01-01T00-00-00"
    try:
        from dataclasses import asdict

        from datasets import Dataset
        from lighteval.logging.evaluation_tracker import EvaluationTracker
        from lighteval.models.model_output import ModelResponse
        from lighteval.tasks.requests import Doc
    except ImportError:
        pytest.importorskip("datasets")
        from datasets import Dataset
        out = tmp_path / "details" / model / date / f"details_{task}_{date}.parquet"
        out.parent.mkdir(parents=True)
        Dataset.from_list(rows).select_columns(["doc", "metric", "model_response"]).to_parquet(str(out))
        return out
    tr = EvaluationTracker(output_dir=str(tmp_path), save_details=True)
    tr.general_config_logger.model_name = model
    for r in rows:
        tr.details_logger.details[task].append(tr.details_logger.Detail(
            Doc(**r["doc"], task_name=task), ModelResponse(**r["model_response"]), r["metric"]))
    ds = Dataset.from_list([asdict(d) for d in tr.details_logger.details[task]])
    tr.save_details(date, {task: ds.select_columns(sorted(ds.column_names))})
    (out,) = (tmp_path / "details").rglob("*.parquet")
    return out
