"""The engine cap: vLLM's own thinking budget (``thinking_token_budget``), restated.

* `_count` -- how each of vLLM's model runners counts the budget, token for token;
* `_strings` -- the start and end strings given to vLLM's `ReasoningConfig`.

Its certificate (`online certify --method engine-budget`) is `_certify._cap`.
"""
