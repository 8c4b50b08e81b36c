"""Prompts and the direct answers of a probe job: the question's chat prompt as ids, and the
optional direct-answer accuracy to the no-thinking prompt (docs/rules.md)."""

from collections.abc import Sequence
from typing import Any

from otbench.probe.config import derive_seed
from otbench.probe.engines import Engine, GenRequest
from otbench.probe.grading import GradeBatch, GradeItem
from otbench.probe.tokens import ProbeFormat

from ._lane import batch_decoder


def direct_answers(engine: Engine, fmt: ProbeFormat, *, model: str, questions: Sequence,
                   prompts: Sequence[Sequence[int]], answer_limit: int, sampling, grade_batch: GradeBatch,
                   tokenizer) -> list[dict[str, Any]]:
    """The direct-answer accuracy (docs/rules.md, optional): one answer per question to the no-thinking prompt.

    The no-thinking prompt is the question's prompt with the thinking closed
    at once (`fmt.probe_prompt` with nothing retained: the family's marker
    and answer prefix right after the generation prompt), sampled once per
    question with the "direct" seed. It is the prompt of position 0, so its
    accuracy sits beside `P(0)` (which has `P` samples of it per trajectory).
    Rows: group, dataset, question, seed, tokens, correct, status.
    """
    seeds = [derive_seed(model, q.dataset, q.id, 0, "direct") for q in questions]
    stream = engine.stream(sampling)
    for i, (p, s) in enumerate(zip(prompts, seeds)):
        stream.submit(i, GenRequest(fmt.probe_prompt(p, (), 0), 1, s, answer_limit, fmt.answer_stop_ids))
    outs: dict[int, Any] = {}
    while stream.in_flight():
        outs.update(stream.poll())
    answers = [outs[i][0].token_ids for i in range(len(questions))]
    texts = batch_decoder(tokenizer)([list(fmt.answer_prefix_ids) + list(a) for a in answers])
    grades = []
    for q, text in zip(questions, texts):
        grades.extend(grade_batch([GradeItem(q.task, q.reference, text, q)]))
    return [{"group": q.group, "dataset": q.dataset, "question": q.id, "seed": s, "tokens": a,
             "correct": bool(c), "status": st}
            for q, s, a, (c, st) in zip(questions, seeds, answers, grades)]


def encode_prompts(fmt: ProbeFormat, tokenizer, questions: Sequence, instructions: dict[str, str]) -> list[list[int]]:
    """Prompt ids per question: the family's chat text, tokenized once (no special-token insertion)."""
    out = []
    for q in questions:
        if getattr(q, "prompt", None) is not None:
            text = q.prompt              # an imported trace's own prompt, as its source sent it
        else:
            text = fmt.family.render_prompt(instructions[q.task], q.body() if hasattr(q, "body") else q.text)
        out.append([int(t) for t in tokenizer.encode(text, add_special_tokens=False)])
    return out
