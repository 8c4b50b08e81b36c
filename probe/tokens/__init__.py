"""Token space: the boundary vocabulary of a tokenizer and probe prompts built by copying ids (docs/rules.md-§3.3)."""

from ._probe_prompts import FormatError, ProbeFormat, compile_format
from ._vocab import (
                     KINDS,
                     Vocabulary,
                     audit,
                     build_vocabulary,
                     classify_form,
                     count_events,
                     tokenizer_hash,
)

__all__ = ["KINDS", "FormatError", "ProbeFormat", "Vocabulary", "audit", "build_vocabulary",
           "classify_form", "compile_format", "count_events", "tokenizer_hash"]
