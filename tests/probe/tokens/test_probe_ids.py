"""Families, prompt rendering and the exact probe token sequences of every family (SPEC §3.1, §3.3).

Expected sequences are written as explicit token strings of the tiny
tokenizer (byte-level: "Ċ" is a line feed, "Ġ" a space) and compared id by
id with what the probe builds by copying ids.
"""

import dataclasses
from pathlib import Path

import pytest
from otbench.probe.config._family import (
    ArtifactError,
    family_from_dict,
    list_entries,
    load_family,
    load_instructions,
    load_model,
)
from otbench.probe.engines._tiny import build_tokenizer
from otbench.probe.tokens._probe_prompts import FormatError, compile_format
from otbench.probe.tokens._vocab import build_vocabulary


@pytest.fixture(scope="module")
def tok():
    pytest.importorskip("transformers")      # the tiny tokenizer is a transformers fast tokenizer
    return build_tokenizer(0)


@pytest.fixture(scope="module")
def vocab(tok):
    return build_vocabulary(tok)


def ids(tok, *tokens):
    out = tok.convert_tokens_to_ids(list(tokens))
    assert tok.unk_token_id not in out and None not in out, tokens
    return out


def fmt_for(name, tok, vocab, rule="vocab"):
    return compile_format(load_family(name), tok, vocab, boundary_rule=rule)


# -- frozen entries ------------------------------------------------------------------


def test_frozen_entries_load():
    assert list_entries("families") == ["deepseek-r1-distill", "generic-chat", "gpt-oss", "qwen3-thinking"]
    models = list_entries("models")
    for m in models:
        entry = load_model(m)
        assert entry.family in list_entries("families")
    assert {"gpt-oss-20b", "qwen3-4b-thinking-2507", "qwen3-30b-a3b-thinking-2507",
            "deepseek-r1-distill-qwen-7b", "deepseek-r1-distill-qwen-14b",
            "deepseek-r1-distill-qwen-32b", "smollm2-135m-instruct"} <= set(models)


@pytest.mark.parametrize("name,t,p,k,pp", [
    ("gpt-oss", 1.0, 1.0, 0, 0.0),               # SPEC §3.1 (paper §A.1)
    ("qwen3-thinking", 0.6, 0.95, 20, 1.5),
    ("deepseek-r1-distill", 0.6, 0.95, 0, 0.0),
])
def test_paper_sampling_and_limits(name, t, p, k, pp):
    f = load_family(name)
    assert (f.sampling.temperature, f.sampling.top_p, f.sampling.top_k, f.sampling.presence_penalty) == (t, p, k, pp)
    assert (f.limits.thinking, f.limits.answer, f.limits.context) == (32768, 4096, 65536)


def test_instruction_placement():
    # system role for Qwen3-Thinking and GPT-OSS, prepended to the user message for R1-Distill
    assert load_family("qwen3-thinking").render_prompt("INS", "Q?") == (
        "<|im_start|>system\nINS<|im_end|>\n<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\n<think>\n")
    assert load_family("deepseek-r1-distill").render_prompt("INS", "Q?") == (
        "<｜begin▁of▁sentence｜><｜User｜>INS\n\nQ?<｜Assistant｜><think>\n")
    oss = load_family("gpt-oss").render_prompt("INS", "Q?")
    assert "<|start|>developer<|message|># Instructions\n\nINS<|end|>" in oss
    assert oss.endswith("<|start|>user<|message|>Q?<|end|><|start|>assistant<|channel|>analysis<|message|>")
    assert set(load_instructions()) == {"math", "choice", "code"}
    assert "\\boxed{}" in load_instructions()["math"]


# -- exact token sequences -----------------------------------------------------------


def test_qwen_probe_at_a_boundary(tok, vocab):
    f = fmt_for("qwen3-thinking", tok, vocab)
    prompt = [7, 8, 9]
    th = ids(tok, "We", "Ġadd", "Ġ", "3", ".ĊĊ", "We", "Ġ", "7")
    # position after the first step (5 tokens, ending on the boundary ".\n\n"):
    # ".\n\n" -> ".\n" (the tokenizer's own one-newline token, not "." + "\n"),
    # no separator after it, then "</think>" and the answer prefix "\n\n".
    want = prompt + th[:4] + ids(tok, ".Ċ", "</think>", "ĊĊ")
    assert f.probe_prompt(prompt, th, 5) == want
    assert f.signal_context(prompt, th, 5) == prompt + th[:4] + ids(tok, ".Ċ")
    # the full trajectory ends on a non-boundary token without a newline: separator added
    assert f.probe_prompt(prompt, th, 8) == prompt + th + ids(tok, "Ċ", "</think>", "ĊĊ")


def test_qwen_probe_without_separator(tok, vocab):
    f = fmt_for("qwen3-thinking", tok, vocab)
    prompt_ids = tok.encode(load_family("qwen3-thinking").render_prompt("I", "Q"), add_special_tokens=False)
    assert prompt_ids[-2:] == ids(tok, "<think>", "Ċ")
    # k = 0: the generation prompt ends with "<think>\n", so no separator
    assert f.probe_prompt(prompt_ids, [], 0) == prompt_ids + ids(tok, "</think>", "ĊĊ")
    # a thinking that ends with ".\n" (as Qwen closes naturally) gets no separator either
    th = ids(tok, "We", ".Ċ")
    assert f.probe_prompt(prompt_ids, th, 2) == prompt_ids + th + ids(tok, "</think>", "ĊĊ")
    # the original answer of a finished trajectory continues exactly as generated
    assert f.answer_context(prompt_ids, th, True) == prompt_ids + th + ids(tok, "</think>", "ĊĊ")
    th2 = ids(tok, "We", ".ĊĊ")
    assert f.answer_context(prompt_ids, th2, True) == prompt_ids + th2 + ids(tok, "</think>", "ĊĊ")
    # cut at the limit: the forced answer of the full-length probe (boundary replaced)
    assert f.answer_context(prompt_ids, th2, False) == prompt_ids + ids(tok, "We", ".Ċ", "</think>", "ĊĊ")


def test_qwen_boundary_without_a_one_newline_token(tok, vocab):
    # ").\n\n" has no ").\n" token in this vocabulary: it closes on its content
    # ids ")" "." and the separator "\n", as before
    f = fmt_for("qwen3-thinking", tok, vocab)
    th = ids(tok, "We", ").ĊĊ")
    assert ids(tok, ").ĊĊ")[0] not in vocab.content_newline
    assert f.probe_prompt([1], th, 2) == [1] + ids(tok, "We") + list(vocab.content[th[1]]) + \
        ids(tok, "Ċ", "</think>", "ĊĊ")
    assert tok.decode(list(vocab.content[th[1]])) == ")."
    # pure and triple line feeds keep one "\n"
    for form in ("ĊĊ", "ĊĊĊ"):
        th = ids(tok, "We", form)
        assert f.probe_prompt([1], th, 2) == [1] + ids(tok, "We", "Ċ", "</think>", "ĊĊ")
        assert f.signal_context([1], th, 2) == [1] + ids(tok, "We", "Ċ")


def test_deepseek_matches_qwen_closing(tok, vocab):
    f = fmt_for("deepseek-r1-distill", tok, vocab)
    th = ids(tok, "We", ".ĊĊ")
    assert f.probe_prompt([1], th, 2) == [1] + ids(tok, "We", ".Ċ", "</think>", "ĊĊ")
    assert f.think_stop_ids == tuple(ids(tok, "</think>"))
    assert f.answer_stop_ids == tuple(ids(tok, "<｜end▁of▁sentence｜>"))


def test_gpt_oss_channel_switch(tok, vocab):
    f = fmt_for("gpt-oss", tok, vocab)
    th = ids(tok, "We", ".ĊĊ")
    switch = ids(tok, "<|end|>", "<|start|>", "a", "s", "s", "i", "st", "a", "n", "t",
                 "<|channel|>", "f", "inal", "<|message|>")
    # no separator; the boundary closes as "." (no newline: the family's separator
    # is empty, so the one-newline token is not used) and the analysis message ends
    # with <|end|>
    assert f.probe_prompt([1], th, 2) == [1] + ids(tok, "We", ".") + switch
    assert f.signal_id == ids(tok, "<|end|>")[0]
    assert f.signal_context([1], th, 2) == [1] + ids(tok, "We", ".")
    assert f.answer_stop_ids == tuple(ids(tok, "<|return|>", "<|call|>"))


def test_generic_answer_forcing(tok, vocab):
    f = fmt_for("generic-chat", tok, vocab)
    th = ids(tok, "We", "Ġadd", ".ĊĊ", "We")
    suffix = tok.encode("Therefore, the final answer is $\\boxed{", add_special_tokens=False)
    assert suffix[:3] == ids(tok, "Therefore", ",", "Ġthe")
    # separator "\n\n": the content ids "." then the blank line, not ".\n"
    assert f.probe_prompt([1], th, 3) == [1] + ids(tok, "We", "Ġadd", ".", "ĊĊ") + suffix
    # no marker: the signal (end of turn) is read right after the retained text
    assert f.signal_context([1], th, 3) == [1] + ids(tok, "We", "Ġadd", ".")
    assert f.signal_id == ids(tok, "<|im_end|>")[0]
    assert f.think_stop_ids == tuple(ids(tok, "<|im_end|>", "<|endoftext|>"))
    # k = 0 after "assistant\n": no separator
    assert f.probe_prompt(ids(tok, "<|im_start|>", "Ċ"), th, 0) == ids(tok, "<|im_start|>", "Ċ") + suffix


def test_span_rule_drops_the_completing_newline(tok, vocab):
    th = ids(tok, "We", ".", "Ċ", "Ċ", "We")
    plain = fmt_for("generic-chat", tok, vocab)
    span = fmt_for("generic-chat", tok, vocab, "vocab+span")
    assert not span.is_span_end(th, 3) and span.is_span_end(th, 4)
    suffix = list(span.answer_prefix_ids)
    # under "vocab+span" the second "\n" completes a double LF: it is dropped, and the
    # retained text ends with "\n", so no separator
    assert span.probe_prompt([1], th, 4) == [1] + ids(tok, "We", ".", "Ċ") + suffix
    # under the vocabulary rule nothing is replaced there
    assert plain.probe_prompt([1], th, 4) == [1] + th[:4] + suffix


def test_prefix_is_copied_never_reencoded(tok, vocab):
    # ids whose concatenated text would re-tokenize differently ("Ġ" + "7" -> "Ġ7"?) are kept as is
    f = fmt_for("qwen3-thinking", tok, vocab)
    th = ids(tok, "Ġ", "7", "Ġ", "7")
    assert f.probe_prompt([], th, 4)[:4] == th


def test_bad_lengths(tok, vocab):
    f = fmt_for("qwen3-thinking", tok, vocab)
    with pytest.raises(ValueError, match=r"`length` must be in 0\.\.2, got 3"):
        f.probe_prompt([], [5, 6], 3)


# -- validation ------------------------------------------------------------------------


def _family_dict(**changes):
    import tomllib

    from otbench.probe.config._family import artifacts_dir
    d = tomllib.loads((artifacts_dir() / "families" / "qwen3-thinking.toml").read_text())
    for key, v in changes.items():
        sect, _, k = key.partition(".")
        d[sect][k] = v
    return d


@pytest.mark.parametrize("change,msg", [
    ({"chat.instruction": "developer"}, r"'chat.instruction' must be one of system, user_prefix, got 'developer'"),
    ({"answer.stop": []}, r"'answer.stop' must be a non-empty list of non-empty strings"),
    ({"sampling.top_k": 2.5}, r"'sampling.top_k' must be int, got float"),
    ({"chat.user": "no placeholder"}, r"'chat.user' must contain \{user\}"),
    ({"thinking.end": ""}, r"a native thinking family needs 'thinking.end'"),
])
def test_family_validation(change, msg):
    with pytest.raises(ArtifactError, match=msg):
        family_from_dict(_family_dict(**change), "f.toml")


def test_missing_key_and_schema(tmp_path: Path):
    d = _family_dict()
    del d["limits"]["answer"]
    with pytest.raises(ArtifactError, match=r"f.toml: missing key 'limits.answer'"):
        family_from_dict(d, "f.toml")
    p = tmp_path / "x.toml"
    p.write_text('schema = "other/1"\n')
    with pytest.raises(ArtifactError, match=r"x.toml: schema must be 'otbench.family/1', got 'other/1'"):
        load_family(p)


def test_marker_must_start_with_signal_token(tok, vocab):
    fam = dataclasses.replace(load_family("qwen3-thinking"), signal_token="<|im_end|>")
    with pytest.raises(FormatError, match=r"must start with the signal token '<\|im_end\|>'"):
        compile_format(fam, tok, vocab)
    fam = dataclasses.replace(load_family("qwen3-thinking"), signal_token="We add")
    with pytest.raises(FormatError, match=r"the signal token 'We add' must be a single token"):
        compile_format(fam, tok, vocab)


@pytest.mark.parametrize("family", ["qwen3-thinking", "deepseek-r1-distill", "gpt-oss", "generic-chat"])
@pytest.mark.parametrize("rule", ["vocab", "vocab+span"])
def test_prompts_are_fresh_lists_of_python_ints(tok, vocab, family, rule):
    """The vLLM stream hands a list prompt to the engine as it is (no per-id conversion), so every
    prompt the probe builds is a new `list` of exact Python ints, at every position."""
    f = fmt_for(family, tok, vocab, rule)
    prompt = (7, 8, 9)
    th = tuple(ids(tok, "We", "Ġadd", "Ġ", "3", ".ĊĊ", "We", "Ċ", "ĊĊ", "Ġ", "7", ".Ċ"))
    built = [f.answer_context(prompt, th, done) for done in (True, False)]
    for k in range(len(th) + 1):
        built += [f.probe_prompt(prompt, th, k), f.signal_context(prompt, th, k)]
    for p in built:
        assert type(p) is list and all(type(t) is int for t in p), p
    assert len({id(p) for p in built}) == len(built)           # never a shared list
