"""The served-model engine's HTTP side against a small fake server on 127.0.0.1: retries, backoff,
refusals at start, request bodies and the stream (no model, no vLLM; fast)."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from otbench.probe.config import Sampling
from otbench.probe.engines import EngineConfig, EngineStartError, GenRequest, SignalRequest
from otbench.probe.engines._http import Client, HTTPStatusError, ServerError
from otbench.probe.engines._openai import OpenAIEngine, OpenAIStream
from otbench.probe.engines._openai_checks import PROBE_TEXT, check_server
from otbench.probe.engines._openai_wire import (
    check_xargs,
    completions,
    generation_body,
    logprob_body,
    signal_of,
)

from otbench.errors import OtbenchError

VOCAB = 300


class CharTokenizer:
    """One id per UTF-8 byte (+3), so the fake server and the client agree exactly."""

    eos_token_id = 2

    def encode(self, text, add_special_tokens=False):
        return [b + 3 for b in text.encode()]

    def decode(self, ids):
        return bytes(i - 3 for i in ids).decode("utf-8", "replace")


def _sample(prompt, seed, max_tokens, stops):
    """The fake model: a deterministic function of (prompt, seed), like a seeded sampler."""
    out, x = [], (sum(prompt) * 7919 + seed * 104729) % 2**31
    for _ in range(max_tokens):
        x = (x * 1103515245 + 12345) % 2**31
        t = 3 + x % 40
        out.append(t)
        if t in stops:
            return out, "stop", t
    return out, "length", None


class Fake:
    """What the fake server does: a queue of failures to serve first, and its quirks."""

    def __init__(self):
        self.fail: list = []            # per request: status code, "drop" (close without answer), "slow"
        self.calls: list[str] = []
        self.served = 0                 # completions actually computed
        self.tokenizer_shift = 0        # != 0: a different tokenizer
        self.ids_in_answer = True
        self.processed_logprobs = False
        self.prompt_as_text = False
        self.seed_plus_j = True
        self.models = ["fake"]
        self.tokenize = True
        self.lock = threading.Lock()

    def completion(self, body):
        prompt, n, seed = body["prompt"], body.get("n", 1), body.get("seed") or 0
        stops = set(body.get("stop_token_ids") or [])
        choices = []
        for j in range(n):
            s = seed + j if self.seed_plus_j else seed * 31 + j
            ids, reason, stop = _sample(prompt, s, body["max_tokens"], stops)
            c = {"index": j, "text": "", "finish_reason": reason, "stop_reason": stop}
            if body.get("logprobs"):
                bias = {int(k): v for k, v in (body.get("logit_bias") or {}).items()}
                top = 3 + (sum(prompt) % 40)
                if top in bias:
                    top = 3 + (sum(prompt) + 1) % 40
                ids = [top]
                lp = {f"token_id:{t}": -1.0 - 0.01 * t + (bias.get(t, 0.0) if self.processed_logprobs else 0.0)
                      for t in [top, *body.get("logprob_token_ids", [])]}
                c["logprobs"] = {"tokens": [], "token_logprobs": [], "text_offset": [], "top_logprobs": [lp]}
                c["finish_reason"] = "length"
            if self.ids_in_answer and body.get("return_token_ids"):
                c["token_ids"] = ids
            choices.append(c)
        with self.lock:
            self.served += 1
        used = len(prompt) if not self.prompt_as_text else len(str(prompt))
        return {"choices": choices, "usage": {"prompt_tokens": used}}


def _handler(fake: Fake):
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _send(self, status, obj, headers=()):
            data = json.dumps(obj).encode()
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _fail(self):
            with fake.lock:
                f = fake.fail.pop(0) if fake.fail else None
            if f is None:
                return False
            if f == "drop":
                self.close_connection = True
                self.connection.close()
            elif f == "slow":
                time.sleep(0.6)
                self._send(200, {"late": True})
            elif isinstance(f, tuple):
                self._send(f[0], {"error": {"message": "busy"}}, [("Retry-After", f[1])])
            else:
                self._send(f, {"error": {"message": f"fake error {f}"}})
            return True

        def do_GET(self):
            fake.calls.append(self.path)
            if self._fail():
                return
            if self.path == "/v1/models":
                self._send(200, {"data": [{"id": m, "max_model_len": 4096} for m in fake.models]})
            elif self.path == "/version":
                self._send(200, {"version": "fake-1"})
            else:
                self._send(404, {"error": {"message": "no such route"}})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            fake.calls.append(self.path)
            if self._fail():
                return
            tok = CharTokenizer()
            if self.path == "/tokenize" and fake.tokenize:
                ids = [t + fake.tokenizer_shift for t in tok.encode(body["prompt"])]
                self._send(200, {"tokens": ids, "count": len(ids)})
            elif self.path == "/detokenize":
                self._send(200, {"prompt": tok.decode(body["tokens"])})
            elif self.path == "/v1/completions":
                if self.headers.get("Authorization") not in (None, "Bearer sesame"):
                    self._send(401, {"error": {"message": "bad key"}})
                    return
                self._send(200, fake.completion(body))
            else:
                self._send(404, {"error": {"message": "no such route"}})
    return H


@pytest.fixture
def fake():
    f = Fake()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _handler(f))
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    f.url = f"http://127.0.0.1:{srv.server_address[1]}"
    yield f
    srv.shutdown()
    srv.server_close()


def _client(fake, sleeps=None, **kw):
    kw.setdefault("retry_s", 30.0)
    return Client(fake.url, sleep=(sleeps.append if sleeps is not None else (lambda s: None)), **kw)


# -- retries and backoff ------------------------------------------------------------------------

def test_retries_5xx_then_succeeds_with_exponential_backoff(fake):
    fake.fail = [503, 502, 500]
    sleeps = []
    c = _client(fake, sleeps)
    assert c.request("GET", "/version") == {"version": "fake-1"}
    assert sleeps == [0.5, 1.0, 2.0] and c.retries == 3
    assert fake.calls == ["/version"] * 4


def test_retry_after_is_honoured_on_429(fake):
    fake.fail = [(429, "7")]
    sleeps = []
    assert _client(fake, sleeps).request("GET", "/version")["version"] == "fake-1"
    assert sleeps == [7.0]


def test_dropped_connections_and_timeouts_are_retried(fake):
    fake.fail = ["drop", "slow"]
    sleeps = []
    c = _client(fake, sleeps, timeout_s=0.3)
    assert c.request("GET", "/version")["version"] == "fake-1"
    assert len(sleeps) == 2


def test_client_errors_are_not_retried(fake):
    fake.fail = [400]
    c = _client(fake)
    with pytest.raises(HTTPStatusError, match=r"HTTP 400: fake error 400") as e:
        c.request("GET", "/version")
    assert e.value.status == 400 and c.retries == 0 and fake.calls == ["/version"]
    assert isinstance(e.value, OtbenchError) and "\n" not in str(e.value)


def test_gives_up_after_retry_s_in_one_line(fake):
    fake.fail = [503] * 100
    c = Client(fake.url, retry_s=0.2, backoff=lambda i: 0.05)
    t = time.monotonic()
    with pytest.raises(ServerError, match=r"HTTP 503.*gave up after \d+ attempts") as e:
        c.request("GET", "/version")
    assert time.monotonic() - t < 5 and "\n" not in str(e.value)
    assert 2 <= len(fake.calls) <= 8


def test_a_dead_server_is_a_one_line_error():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                   # nothing listens there now
    c = Client(f"http://127.0.0.1:{port}", retry_s=0.1, backoff=lambda i: 0.02)
    with pytest.raises(ServerError, match="ConnectionRefusedError"):
        c.request("GET", "/v1/models")


def test_base_url_forms():
    assert Client("http://127.0.0.1:9/v1")._prefix == ""
    assert Client("http://127.0.0.1:9/proxy/v1/")._prefix == "/proxy"
    with pytest.raises(EngineStartError, match="base_url must be"):
        Client("127.0.0.1:9")


# -- the start-up check --------------------------------------------------------------------------

CFG = EngineConfig(kind="openai", model="local-tokenizer", base_url="x", max_model_len=1024)


def test_a_faithful_server_passes_and_is_described(fake):
    info = check_server(_client(fake), CFG, CharTokenizer())
    assert info == {"model": "fake", "version": "fake-1", "seed_plus_j": True}
    assert "/tokenize" in fake.calls and "/detokenize" in fake.calls


@pytest.mark.parametrize("quirk, message", [
    ({"tokenizer_shift": 1}, "tokenizer differs from the local one"),
    ({"tokenize": False}, r"/tokenize.*refused \(HTTP 404\)"),
    ({"ids_in_answer": False}, "no token ids"),
    ({"processed_logprobs": True}, "--logprobs-mode raw_logprobs"),
    ({"prompt_as_text": True}, "does not take a token-id prompt as ids"),
    ({"models": ["a", "b"]}, "serves 2 models .*engine.served_model"),
])
def test_a_server_that_cannot_serve_stp_exactly_is_refused_in_one_line(fake, quirk, message):
    for k, v in quirk.items():
        setattr(fake, k, v)
    with pytest.raises(EngineStartError, match=message) as e:
        check_server(_client(fake), CFG, CharTokenizer())
    assert "\n" not in str(e.value)


def test_served_model_and_context_limit(fake):
    import dataclasses
    with pytest.raises(EngineStartError, match="does not serve 'other'"):
        check_server(_client(fake), dataclasses.replace(CFG, served_model="other"), CharTokenizer())
    with pytest.raises(EngineStartError, match="max_model_len 4096, below"):
        check_server(_client(fake), dataclasses.replace(CFG, max_model_len=8192), CharTokenizer())


def test_a_server_without_seed_plus_j_is_detected(fake):
    fake.seed_plus_j = False
    assert check_server(_client(fake), CFG, CharTokenizer())["seed_plus_j"] is False


# -- request bodies and answers ------------------------------------------------------------------

S = Sampling(temperature=0.6, top_p=0.95, top_k=20, presence_penalty=0.5)


def test_generation_body_sends_every_sampling_field():
    b = generation_body("m", GenRequest((5, 6), 3, 11, 9, (7,), extra_args={"k": [1, 2.5, "x"]}), S)
    assert b["prompt"] == [5, 6] and b["n"] == 3 and b["seed"] == 11 and b["max_tokens"] == 9
    assert (b["temperature"], b["top_p"], b["top_k"], b["presence_penalty"]) == (0.6, 0.95, 20, 0.5)
    # the server's generation-config defaults never apply
    assert (b["min_p"], b["frequency_penalty"], b["repetition_penalty"]) == (0.0, 0.0, 1.0)
    assert b["stop_token_ids"] == [7] and b["return_token_ids"] is True
    assert b["vllm_xargs"] == {"k": [1, 2.5, "x"]}
    assert generation_body("m", GenRequest((5,), 1, 0, 4, (7,), ignore_eos=True), S)["stop_token_ids"] == []
    with pytest.raises(ValueError, match="cannot be sent as vllm_xargs"):
        check_xargs({"k": {"nested": 1}})


def test_logprob_body_and_signal():
    b = logprob_body("m", [1, 2], [9], exclude=9)
    assert b["logit_bias"] == {"9": -100.0} and b["logprob_token_ids"] == [9]
    assert b["temperature"] == 0.0 and b["return_tokens_as_token_ids"] is True
    ch = {"token_ids": [4], "logprobs": {"top_logprobs": [{"token_id:4": -0.5, "token_id:9": -3.0}]}}
    assert tuple(signal_of(ch, 9, "w")) == (-3.0, -0.5, 4)
    with pytest.raises(ServerError, match="stayed the greedy choice"):
        signal_of({"token_ids": [9], "logprobs": ch["logprobs"]}, 9, "w")
    with pytest.raises(ServerError, match="not token_id:N"):
        signal_of({"token_ids": [4], "logprobs": {"top_logprobs": [{"a": -1.0}]}}, 9, "w")


def test_completions_strip_the_stop_id_like_the_in_process_engine():
    ch = [{"token_ids": [5, 6, 7], "finish_reason": "stop", "stop_reason": 7},
          {"token_ids": [5, 2], "finish_reason": "stop", "stop_reason": None},
          {"token_ids": [5, 6], "finish_reason": "length"},
          {"token_ids": [5], "finish_reason": "stop", "stop_reason": "</s>"}]
    got = completions(ch, {7}, {2}, "w")
    # no log-probabilities were asked: the four log-probability fields stay None
    assert [tuple(c) for c in got] == [((5, 6), 7, None, None, None, None), ((5,), 2, None, None, None, None),
                                       ((5, 6), None, None, None, None, None), ((5,), -1, None, None, None, None)]


def test_sampled_token_logprobs_are_asked_and_read_when_the_request_wants_them():
    b = generation_body("m", GenRequest((5, 6), 2, 11, 9, (7,), logprobs=True), S)
    assert b["logprobs"] == 0                                # the sampled token's only
    assert "logprobs" not in generation_body("m", GenRequest((5, 6), 2, 11, 9, (7,)), S)
    ch = [{"token_ids": [5, 6, 7], "finish_reason": "stop", "stop_reason": 7,
           "logprobs": {"token_logprobs": [-0.5, -1.25, -0.1], "tokens": ["token_id:5"] * 3}}]
    got = completions(ch, {7}, {2}, "w", logprobs=True)
    assert got[0].token_ids == (5, 6) and got[0].logprobs == (-0.5, -1.25)
    assert completions(ch, {7}, {2}, "w")[0].logprobs is None
    for bad in ({}, {"token_logprobs": [-0.5]}, {"token_logprobs": [-0.5, None, -1.0]}):
        with pytest.raises(ServerError, match="log-probability per decoded token"):
            completions([dict(ch[0], logprobs=bad)], {7}, {2}, "w", logprobs=True)


# -- the stream over the fake server -------------------------------------------------------------

def _engine(fake, *, seed_plus_j=True, concurrency=4):
    """An `OpenAIEngine` on the fake server without a model folder (tokenizer: `CharTokenizer`)."""
    from concurrent.futures import ThreadPoolExecutor
    e = object.__new__(OpenAIEngine)
    e.config = EngineConfig(kind="openai", model="", base_url=fake.url, max_concurrency=concurrency)
    e._client = _client(fake)
    e._tok, e._vocab, e._eos = CharTokenizer(), VOCAB, {2}
    e._pool = ThreadPoolExecutor(max_workers=concurrency)
    e._server = {"model": "fake", "version": "fake-1", "seed_plus_j": seed_plus_j}
    e.model = "fake"
    return e


def _drain(stream):
    out = {}
    while stream.in_flight():
        out.update(stream.poll())
    return out


def test_stream_results_depend_only_on_the_request(fake):
    reqs = {i: GenRequest((10 + i, 11), 3, 100 + i, 12, (5, 6)) for i in range(8)}
    e = _engine(fake)
    s = e.stream(S)
    assert isinstance(s, OpenAIStream)
    for t, r in reqs.items():
        s.submit(t, r)
    s.submit("sig", SignalRequest((1, 2, 3), 9))
    with pytest.raises(ValueError, match="already in flight"):
        s.submit(0, reqs[0])
    a = _drain(s)
    # sample j of an n-request is the single sample of seed + j ...
    e1 = _engine(fake, seed_plus_j=False)          # ... which a server without it gets, split
    b = _drain(_submit_all(e1.stream(S), reqs))
    for t, r in reqs.items():
        want = [_sample(r.prompt, r.seed + j, r.max_tokens, set(r.stop_ids)) for j in range(r.n)]
        assert [c.token_ids + ((c.stop_id,) if c.stop_id is not None else ()) for c in a[t]] \
            == [tuple(w[0]) for w in want]
        assert a[t] == b[t]
    assert a["sig"].other_id != 9 and a["sig"].logp_end == pytest.approx(-1.09)
    e.close()
    e1.close()


def test_a_request_with_its_own_sampling_is_sent_with_it(fake, monkeypatch):
    e = _engine(fake)
    seen = {}
    orig = e._generate_one
    monkeypatch.setattr(e, "_generate_one", lambda r, sampling: seen.setdefault(r.seed, sampling)
                        and orig(r, sampling))
    own = Sampling(temperature=0.25, top_p=0.5)
    s = e.stream(S)
    s.submit("own", GenRequest((10, 11), 1, 1, 4, (5,), sampling=own))
    s.submit("stream's", GenRequest((10, 11), 1, 2, 4, (5,)))
    _drain(s)
    assert seen == {1: own, 2: S}
    body = generation_body("m", GenRequest((5,), 1, 0, 4, (7,), sampling=own), own)
    assert body["temperature"] == 0.25 and body["top_p"] == 0.5
    e.close()


def _submit_all(stream, reqs):
    for t, r in reqs.items():
        stream.submit(t, r)
    return stream


def test_a_lost_answer_is_retried_to_the_same_result(fake):
    e = _engine(fake)
    r = GenRequest((3, 4), 2, 7, 10, ())
    clean = e.generate([r], S)
    fake.fail = ["drop", 503]               # the answer is lost on the way, then the server is busy
    again = e.generate([r], S)
    assert again == clean and e.retries() == 2
    e.close()


def test_a_request_that_fails_for_good_raises_from_poll(fake):
    e = _engine(fake)
    e._client = Client(fake.url, retry_s=0.1, backoff=lambda i: 0.02)
    fake.fail = [503] * 100
    s = e.stream(S)
    s.submit("x", GenRequest((3,), 1, 1, 4, ()))
    with pytest.raises(ServerError, match="gave up"):
        _drain(s)
    e.close()


def test_the_engine_refuses_without_base_url_or_key(monkeypatch):
    with pytest.raises(EngineStartError, match="engine.base_url is required"):
        OpenAIEngine(EngineConfig(kind="openai", model="m"))
    monkeypatch.delenv("OTBENCH_TEST_KEY", raising=False)
    with pytest.raises(EngineStartError, match=r"\$OTBENCH_TEST_KEY, which is not set"):
        OpenAIEngine(EngineConfig(kind="openai", model="m", base_url="http://127.0.0.1:1",
                                  api_key_env="OTBENCH_TEST_KEY"))


def test_the_api_key_goes_in_the_header(fake):
    c = Client(fake.url, api_key="sesame", retry_s=1)
    assert "choices" in c.request("POST", "/v1/completions", logprob_body("fake", [5], [5]))
    c = Client(fake.url, api_key="wrong", retry_s=1)
    with pytest.raises(HTTPStatusError, match="401"):
        c.request("POST", "/v1/completions", logprob_body("fake", [5], [5]))


def test_probe_text_covers_the_hard_cases():
    assert "\n\n" in PROBE_TEXT and "  " in PROBE_TEXT and any(ord(c) > 0x3000 for c in PROBE_TEXT)


def test_closing_the_client_ends_retries_at_once(fake):
    fake.fail = [503] * 1000
    c = Client(fake.url, retry_s=60, backoff=lambda i: 5.0)
    errors = []
    t = threading.Thread(target=lambda: errors.append(pytest.raises(ServerError, c.request, "GET", "/version")))
    t0 = time.monotonic()
    t.start()
    while not fake.calls:
        time.sleep(0.01)
    c.close()
    t.join(10)
    assert not t.is_alive() and time.monotonic() - t0 < 5
    assert "the client was closed" in str(errors[0].value)
