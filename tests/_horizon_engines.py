"""A scripted engine for the horizon probe tests: a deterministic "model" read from the context ids.

`ScriptedEngine` implements the engine interface the horizon runner uses
(`generate`, `choice_logprobs`, `tokenizer`, `vocab_size`, ...) with a
reader that picks an option letter from the context:

* ``reveal``: the letter of the last "candidate answer: X" in the decoded
  context, else "A" -- a reader that uses exactly the information in the
  stopped reasoning (the scripted positive control: uninformative items
  with balanced gold letters are then right 25% of the time);
* ``hash``: a letter from the SHA-256 of the context ids -- any change of
  a single id (a separator inserted, a re-encoded prefix) changes the
  answer with probability 3/4, so agreement between a natural answer and
  its replay tests token-exact replay.

Trajectories are seeded random plain-token sequences that end with the
thinking-end token (finished) or run to the limit; answers are the reader's
letter followed by the answer stop token.
"""

import hashlib
import math
import random

from otbench.probe.engines._interface import Completion


class ScriptedEngine:
    name = "scripted"

    def __init__(self, tokenizer, *, mode: str = "hash", end_token: str = "</think>",
                 answer_stop: str = "<|im_end|>", n_options: int = 4):
        self._tok = tokenizer
        self.mode = mode
        self.n_options = n_options
        self.end_id = tokenizer.convert_tokens_to_ids(end_token)
        self.stop_id = tokenizer.convert_tokens_to_ids(answer_stop)
        special = set(tokenizer.all_special_ids) | {
            i for i, t in tokenizer.added_tokens_decoder.items() if t.special}
        self.plain = [i for i in range(len(tokenizer)) if i not in special]
        self.letter_ids = {c: tokenizer.encode(c, add_special_tokens=False)[0] for c in "ABCDEFGHIJ"}
        self.calls = {"generate": 0, "choice_logprobs": 0}

    def tokenizer(self):
        return self._tok

    def vocab_size(self) -> int:
        return len(self._tok)

    def read(self, ids) -> str:
        if self.mode == "reveal":
            text = self._tok.decode(list(ids))
            at = text.rfind("candidate answer: ")
            if at >= 0 and at + 18 < len(text):
                return text[at + 18]
            return "A"
        h = hashlib.sha256(str(list(ids)).encode()).digest()
        return "ABCDEFGHIJ"[h[0] % self.n_options]

    def generate(self, requests, sampling):
        self.calls["generate"] += 1
        out = []
        for r in requests:
            if self.end_id in r.stop_ids:            # a trajectory
                rng = random.Random(r.seed)
                n = rng.randint(1, int(r.max_tokens) + 12)
                if n <= r.max_tokens:
                    out.append([Completion(tuple(rng.choice(self.plain) for _ in range(n)), self.end_id)])
                else:
                    out.append([Completion(tuple(rng.choice(self.plain) for _ in range(r.max_tokens)), None)])
            else:                                    # an answer (n samples, all the reader's letter)
                out.append([Completion((self.letter_ids[self.read(r.prompt)],), self.stop_id)] * r.n)
        return out

    def choice_logprobs(self, contexts, token_ids):
        self.calls["choice_logprobs"] += 1
        res = []
        for c in contexts:
            pick = self.letter_ids[self.read(c)]
            res.append([math.log(0.6) if t == pick else math.log(0.05) for t in token_ids])
        return res

    def cache_stats(self):
        return None

    def info(self):
        return {"engine": "scripted", "mode": self.mode, "config": {}}

    def close(self):
        pass
