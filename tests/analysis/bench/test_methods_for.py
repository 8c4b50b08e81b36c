"""`methods_for`: `bench compare` resolves each method once and names the ones the set cannot run."""

import collections

from otbench.analysis.bench import _evaluate, methods_for
from otbench.analysis.methods import METHODS, resolve

from _bad_input import small_set  # noqa: E402


def test_each_registered_method_is_resolved_once_and_the_unrunnable_are_named(monkeypatch):
    ms = small_set(synthetic=True)
    calls = collections.Counter()

    def counting(spec, **kw):
        calls[spec if isinstance(spec, str) else type(spec).__name__] += 1
        return resolve(spec, **kw)

    monkeypatch.setattr(_evaluate, "resolve", counting)
    kept, skipped = methods_for(ms)
    assert set(calls) == set(METHODS) and set(calls.values()) == {1}
    assert len(kept) + len(skipped) == len(METHODS)
    for name, why in skipped:
        ok, reason = resolve(name).runnable_on(ms)
        assert not ok and why == reason
    assert all(m.runnable_on(ms)[0] for m in kept)


def test_given_methods_are_kept_and_features_reach_the_learned_ones():
    ms = small_set(synthetic=True)
    kept, skipped = methods_for(ms, ["budget-forcing"])
    assert [m.name for m in kept] == ["budget-forcing"] and skipped == []
    learned = [n for n in METHODS if resolve(n).accepts("features")]
    if learned:
        (m,), _ = methods_for(ms, learned[:1], features="hashed")
        assert m.name == resolve(learned[0]).name
