"""A recording HTTP server on 127.0.0.1 and a measurement set probed on a served engine.

The server answers every request with HTTP 404 (so an engine start fails in one
line after its first request) and records each request's method, path and
headers: a test reads who was sent what, credentials included.
"""

import dataclasses
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np


class Recorder:
    """An HTTP server on 127.0.0.1 (never another interface) that records every request."""

    def __init__(self):
        self.requests: list[dict] = []
        rec = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                rec.requests.append({"method": self.command, "path": self.path,
                                     "headers": {k.lower(): v for k, v in self.headers.items()}})
                body = json.dumps({"error": {"message": "recording server"}}).encode()
                self.send_response(404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _any

            def log_message(self, *a):
                pass

        self._srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._srv.server_address[1]}"
        threading.Thread(target=self._srv.serve_forever, daemon=True).start()

    def credentialed(self) -> list[dict]:
        """The requests that carried a credential (an Authorization header)."""
        return [r for r in self.requests if "authorization" in r["headers"]]

    def close(self) -> None:
        self._srv.shutdown()
        self._srv.server_close()


def tokenizer_folder(folder: Path) -> Path:
    """A tiny local model folder: a word-level fast tokenizer and a config.json with vocab_size."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder.mkdir(parents=True, exist_ok=True)
    vocab = {w: i for i, w in enumerate(["[UNK]", "</s>", "a", "b", "c", "think", "answer"])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "</s>", "unk_token": "[UNK]"}))
    (folder / "config.json").write_text(json.dumps({"vocab_size": len(vocab), "eos_token_id": 1}))
    return folder


def served_set(directory: Path, recorded_url: str, model_folder: Path, *,
               key_env: str = "OTBENCH_TEST_KEY", timeout_s: float | None = None) -> Path:
    """A small probe-run-like set whose provenance records a served engine at `recorded_url`
    with its key in `$key_env` (the probe's provenance keys, a margin signal, a tokens table)."""
    import pyarrow as pa
    from otbench.analysis import from_ragged, ragged, save
    from otbench.analysis.bench import assign_splits

    rows = [("g", "q0", 0, [0, 2, 4], [0, 1, 2]), ("g", "q0", 1, [0, 3], [0, 0]),
            ("g", "q1", 0, [0, 1, 4], [0, 2, 2]), ("g", "q1", 1, [0, 2], [1, 1]),
            ("g", "q2", 0, [0, 2, 3], [1, 2, 2]), ("g", "q2", 1, [0, 4], [0, 2])]
    ms = from_ragged(model=["m"] * len(rows), group=[r[0] for r in rows], question=[r[1] for r in rows],
                     trajectory=np.array([r[2] for r in rows]), probes=np.full(len(rows), 2),
                     n=np.array([len(r[3]) - 1 for r in rows]),
                     L=ragged([r[3] for r in rows], np.int64), C=ragged([r[4] for r in rows], np.int64),
                     y=np.zeros(len(rows), dtype=np.int64),
                     signals={"margin": ragged([[0.5] * len(r[3]) for r in rows], np.float64)})
    prov = {"family": {"name": "generic-chat", "version": 1}, "sampling": {},
            "engine": {"engine": "openai", "config": {"kind": "openai", "base_url": recorded_url,
                                                      "api_key_env": key_env,
                                                      **({"request_timeout_s": timeout_s, "retry_s": 0.0}
                                                         if timeout_s is not None else {})}},
            "model": {"weights": str(model_folder)}, "probe": {}, "boundary_rule": "vocab"}
    ms = dataclasses.replace(assign_splits(ms, seed=0, ratios=(0.0, 0.0, 1.0)), provenance=prov)
    tokens = pa.table({"model": ["m"] * len(rows), "dataset": ["d"] * len(rows),
                       "group": [r[0] for r in rows], "question": [r[1] for r in rows],
                       "trajectory": pa.array([r[2] for r in rows], pa.int32()),
                       "prompt": [[2, 3]] * len(rows), "thinking": [[4, 4, 4, 4]] * len(rows),
                       "seed_think": [1] * len(rows), "seed_answer": [2] * len(rows)})
    save(ms, directory, extra_tables={"tokens": tokens})
    return directory


class Hostile:
    """An HTTP server on 127.0.0.1 that misbehaves by the first path segment of a request
    (a base URL `http://127.0.0.1:PORT/MODE` keeps MODE as its path prefix):

    huge (a 3 GB Content-Length, then silence), endless (an endless chunked body), drip (one
    byte a second), deep (JSON nested 100 000 deep), redirect (302 with a JSON body), and the
    answer modes, which serve `/v1/models`, `/tokenize` and `/detokenize` faithfully for
    `tok` and then answer `/v1/completions` with `answers[MODE]` (a choice list, or a function
    of the request body giving one). `models[MODE]`, where given, is MODE's `/v1/models`
    answer, and `metrics[MODE]` its `/metrics` text (else `/metrics` is 404); `paths[MODE]` maps
    further paths (`/version`) to their JSON answers."""

    def __init__(self, tok=None, answers: dict | None = None, models: dict | None = None,
                 metrics: dict | None = None, paths: dict | None = None):
        self.answers = answers or {}
        self.paths = paths or {}
        self.models = models or {}
        self.metrics = metrics or {}
        self.tok = tok
        me = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _send(self, status, doc, extra=()):
                body = json.dumps(doc).encode()
                self.send_response(status)
                for k, v in extra:
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _any(self):
                import time

                n = int(self.headers.get("Content-Length") or 0)
                req = json.loads(self.rfile.read(n)) if n else {}
                mode, _, rest = self.path.lstrip("/").partition("/")
                try:
                    if mode == "huge":
                        self.send_response(200)
                        self.send_header("Content-Length", str(3 << 30))
                        self.end_headers()
                        self.wfile.write(b"[" * 1024)
                        time.sleep(30)
                    elif mode == "endless":
                        self.send_response(200)
                        self.send_header("Transfer-Encoding", "chunked")
                        self.end_headers()
                        while True:
                            self.wfile.write(b"4000\r\n" + b" " * 0x4000 + b"\r\n")
                    elif mode == "drip":
                        self.send_response(200)
                        self.send_header("Content-Length", "100000")
                        self.end_headers()
                        for _ in range(100000):
                            self.wfile.write(b" ")
                            self.wfile.flush()
                            time.sleep(0.5)
                    elif mode == "deep":
                        body = b"[" * 100_000 + b"]" * 100_000
                        self.send_response(200)
                        self.send_header("Content-Length", str(len(body)))
                        self.end_headers()
                        self.wfile.write(body)
                    elif mode == "redirect":
                        self._send(302, {"data": [{"id": "m"}]}, [("Location", "http://127.0.0.1:9/")])
                    else:
                        self._answer(mode, "/" + rest, req)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _answer(self, mode, path, req):
                if path == "/v1/models":
                    return self._send(200, me.models.get(mode, {"data": [{"id": "m"}]}))
                if path in me.paths.get(mode, {}):
                    return self._send(200, me.paths[mode][path])
                if path == "/metrics" and mode in me.metrics:
                    body = me.metrics[mode].encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    return self.wfile.write(body)
                if path == "/tokenize":
                    return self._send(200, {"tokens": me.tok.encode(req["prompt"], add_special_tokens=False)})
                if path == "/detokenize":
                    return self._send(200, {"prompt": me.tok.decode(req["tokens"])})
                if path == "/v1/completions":
                    answer = me.answers[mode]
                    return self._send(200, {"choices": answer(req) if callable(answer) else answer,
                                            "usage": {"prompt_tokens": len(req["prompt"])}})
                return self._send(404, {"error": "no such path"})

            do_GET = do_POST = _any

            def log_message(self, *a):
                pass

        self._srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._srv.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._srv.server_address[1]}"
        threading.Thread(target=self._srv.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._srv.shutdown()
        self._srv.server_close()
