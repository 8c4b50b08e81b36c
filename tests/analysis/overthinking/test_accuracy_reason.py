"""The line that says why a set's own full-thinking accuracy is what it is (issue 37 item 4)."""

from otbench.analysis.overthinking import accuracy_reason


def test_unparseable_own_answers_say_so():
    # the demo's case: a small model whose answers hold no box the grader reads
    line = accuracy_reason([0] * 27, ["no_answer"] * 20 + ["parse_error"] * 7)
    assert line == ("Original full-thinking accuracy 0.00 % (0 of 27 own answers correct): 27 of the 27 "
                    "answers hold no answer the grader reads (20 no_answer, 7 parse_error: no final "
                    "\\boxed{} or one that does not parse), so the model's own answers are not parseable "
                    "and the accuracy says nothing of its reasoning (docs/rules.md)")


def test_readable_and_mixed_answers():
    assert accuracy_reason([1, 0], ["ok", "wrong_answer"]).endswith(
        "every answer was read by the grader; the wrong ones are wrong answers")
    line = accuracy_reason([1, 0, 0], ["ok", "no_answer", "wrong_answer"])
    assert "1 of the 3 answers hold no answer the grader reads (1 no_answer" in line
    assert "not parseable" not in line                 # one answer was read and right
    assert accuracy_reason([], []) == "Original full-thinking accuracy: no trajectories"
    line = accuracy_reason([1, 0], ["source exact_match=1; otbench 0 no_answer", "source exact_match=0; otbench 0 ok"])
    assert line.endswith("2 of the 2 verdicts are the imported source's own (docs/guides/import-traces.md)")
