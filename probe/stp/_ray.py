"""Data-parallel probing on Ray: one engine per actor, fed work units continuously.

`RayExecutor` starts `workers` actors (`ProbeWorker`), each opening its own
engine (vLLM with tensor parallelism inside as vLLM supports it, or
transformers) on whatever node Ray places it, and checks that every worker
sees the same model fingerprint, tokenizer, prompts, engine stack and
device: units from different workers are interchangeable only then. The
driver (the process running `run_job`) keeps the queue of pending units
(`Feeder`) and is the only writer of the journal and the output: actors
return `UnitResult`s, never touch files. Each actor keeps one
`UnitStream` for the whole run, holding its engine's bound on units in
flight plus `probe.units_per_batch` spare units in a backlog; each
`advance` call returns as soon as a unit is done, and the driver sends the
next call (topping the actor up) before it commits the results, so an
engine never drains between batches or waits for the driver. The units
held by a dead actor go back to the queue for the others; if every actor
dies the run stops, and `--resume` continues from the journal.

Ray is an optional dependency, imported only here and only when a run asks
for workers or a cluster (`--workers N`, `--ray-address ADDR`). Without an
address (and no `RAY_ADDRESS` in the environment) a local Ray instance is
started and stopped afterwards; an already-initialized Ray (e.g. a test
session's) is used as is. On a cluster every node needs the same otbench
install and the model folder at the same path (the job's `model.path`);
workers check that they loaded identical weights.

What the driver's shell chose for caches and offline mode reaches the
workers through the actors' `runtime_env` (`worker_env`: Hugging Face
cache and offline variables, `OTBENCH_*`, vLLM's logging, the quiet-output
settings; Ray merges an actor's `env_vars` into the job's). Credentials
(`HF_TOKEN` ...) are not forwarded: a runtime_env is visible in Ray's
dashboard. The model is located before any actor starts: on the driver
when Ray is local, else by one small Ray task with the same environment on
the cluster, so a missing model is one line and exit 2, not an actor's
traceback. An actor whose start fails with otbench's own error reports
that error (one line) from `describe`.
"""

import collections
import math
import os
import socket
import sys
import time
from collections.abc import Sequence
from typing import Any

from otbench.descriptors import ENGINE_SPECS
from otbench.errors import OtbenchError

from ._loop import RunStats


class RayMissingError(OtbenchError, ImportError):
    """Ray is needed (workers or a cluster were asked for) but not installed."""


def import_ray():
    """The `ray` module, or a `RayMissingError` that says how to install it."""
    try:
        import ray
    except ImportError:
        raise RayMissingError("multi-worker probing (--workers > 1 or --ray-address) needs Ray: "
                          "pip install 'ray>=2.40' (the probe extra installs it)") from None
    return ray


WORKER_ENV = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME", "HF_HUB_CACHE",
              "HUGGINGFACE_HUB_CACHE", "HF_DATASETS_CACHE", "TRANSFORMERS_CACHE", "HF_XET_CACHE",
              "VLLM_LOGGING_LEVEL", "VLLM_CACHE_ROOT", "VLLM_NO_USAGE_STATS", "DO_NOT_TRACK",
              "TOKENIZERS_PARALLELISM", "PYTHONWARNINGS", "TRANSFORMERS_VERBOSITY", "TF_CPP_MIN_LOG_LEVEL",
              "TORCH_LOGS", "TORCH_CPP_LOG_LEVEL")
"""Variables of the driver's environment that the workers get (with every `OTBENCH_*`)."""


def worker_env(environ=None) -> dict[str, str]:
    """The `env_vars` of the workers' `runtime_env`: `WORKER_ENV` and `OTBENCH_*` as set in `environ`."""
    env = os.environ if environ is None else environ
    return {k: str(v) for k, v in sorted(env.items()) if k in WORKER_ENV or k.startswith("OTBENCH_")}


def actor_env(worker_gpus: float, environ=None) -> dict[str, Any]:
    """The workers' `runtime_env`: `worker_env`, and no visible GPU for a worker that asks for none.

    Ray 2.60 no longer hides the GPUs from a task or actor that asks for none: its worker sets
    `CUDA_VISIBLE_DEVICES` only from the accelerator ids it was assigned and skips an empty set
    unless `RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=1` (`python/ray/_private/utils.py`,
    `set_visible_accelerator_ids`; the flag came with ray-project/ray#54928, its default turned off
    in ray-project/ray#62492). A GPU-less worker (CPU engines on a GPU cluster) would then see, and
    its engine might use, every GPU of its node; an empty `CUDA_VISIBLE_DEVICES` in its own
    environment hides them again (Ray leaves it as set, having no ids to write).
    """
    env = worker_env(environ)
    if not worker_gpus:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return {"env_vars": env}


def locate_model(job) -> tuple[str, str | None]:
    """(model folder, revision) the way a worker will find it; raises otbench's one-line error if it cannot."""
    from ._setup import resolve_engine_config

    cfg = resolve_engine_config(job, lambda m: None)
    return cfg.model, cfg.revision


def _one_line(ray, e: BaseException) -> BaseException:
    """otbench's own error inside a Ray task error (one line), else `e` itself."""
    cause = getattr(e, "cause", None) if isinstance(e, ray.exceptions.RayTaskError) else None
    return cause if isinstance(cause, OtbenchError) else e


class ProbeWorker:
    """One engine inside a Ray actor (wrapped by `ray.remote` at run time).

    A start that fails with otbench's own error (a model that is not there,
    an engine that refuses the job) is kept and raised by `describe`, so the
    driver gets the error itself, not Ray's account of a dead actor."""

    def __init__(self, job, questions, instructions, grader: str, index: int):
        self._failed: OtbenchError | None = None
        self.engine = None
        self._stream = None
        try:
            self._start(job, questions, instructions, grader, index)
        except OtbenchError as e:
            self._failed = e
            if self.engine is not None:
                self.engine.close()
                self.engine = None

    def _start(self, job, questions, instructions, grader: str, index: int):
        from otbench.probe.engines import open_engine
        from otbench.probe.grading import open_grader

        from ._setup import (
            kv_cache,
            memory_line,
            prepare,
            requests_in_flight,
            resolve_engine_config,
            units_in_flight,
        )

        def log(msg):
            print(f"[worker {index}] {msg}", file=sys.stderr, flush=True)

        self.job, self.questions = job, questions
        self.engine_cfg = resolve_engine_config(job, log)
        log(f"starting the {self.engine_cfg.kind} engine on {self.engine_cfg.model} ...")
        self.engine = open_engine(self.engine_cfg)
        self.tok, self.fmt, self.setup = prepare(job, self.engine_cfg, self.engine, questions, instructions)
        self.grade, self._grade_close = open_grader(grader)[1:]
        self.where = {"worker": index, "host": socket.gethostname(), "pid": os.getpid()}
        self.bound = units_in_flight(job, self.engine, self.setup.prompts)
        self.requests = requests_in_flight(job, self.engine, self.setup.prompts)
        self.kv = kv_cache(job, self.engine)
        log(memory_line(job, self.engine, self.setup.prompts))
        self._stream = None
        self._backlog: collections.deque = collections.deque()

    def describe(self):
        """(EngineSetup, EngineConfig, where this worker runs, its bound on units in flight)."""
        if self._failed is not None:
            raise self._failed
        return self.setup, self.engine_cfg, self.where, self.bound

    def advance(self, units: Sequence[tuple[int, int]]):
        """Take `units` into this worker's backlog, run until at least one unit is done; (results, stats).

        The worker's `UnitStream` lives across calls, so its engine keeps the
        same units in flight while the driver commits and sends more (with
        vLLM the engine core decodes in its own process meanwhile); a unit
        is admitted from the backlog the moment one leaves. Returns no
        results only when the worker has nothing left.
        """
        from ._imported import think_results
        from ._loop import UnitStream

        if self._stream is None:
            job = self.job
            self._stream = UnitStream(
                self.engine, self.fmt, model=job.model, questions=self.questions,
                prompts=self.setup.prompts, P=job.P, b=job.b, thinking_limit=job.thinking_limit,
                answer_limit=job.answer_limit, sampling=job.sampling, grade_batch=self.grade,
                tokenizer=self.tok, given=think_results(job, self.questions, self.fmt),
                max_units=self.bound, max_requests=self.requests, kv_cache=self.kv,
                hesitation_words=job.hesitation_words, field_probes=job.field_probes,
                  deepconf_window=job.deepconf_window)
        us = self._stream
        self._backlog.extend(tuple(u) for u in units)
        out = []
        while True:
            while self._backlog and us.wants():
                us.add(self._backlog.popleft())   # its first requests reach the engine now
            if out or not us.in_flight:
                break                             # the freed places are refilled before returning
            out.extend(us.step())
        return out, us.take_stats()

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
        if self.engine is not None:
            getattr(self, "_grade_close", lambda: None)()
            self.engine.close()


class Feeder:
    """Which units each worker holds, and what to send it next (the driver's side of `advance`).

    Each live worker holds up to its bound on units in flight plus `spare`
    more in its backlog, so a finished unit is replaced without a round trip
    to the driver. A worker that dies gives its units back to the front of
    the queue. Pure bookkeeping (no Ray), so it is tested on its own.
    """

    def __init__(self, units: Sequence[tuple[int, int]], bounds: Sequence[int], spare: int,
                 alive: list[bool] | None = None):
        self.queue = collections.deque(tuple(u) for u in units)
        self.want = [b + spare for b in bounds]
        self.held: list[set] = [set() for _ in bounds]
        self.alive = alive if alive is not None else [True] * len(bounds)   # updated in place

    def top_up(self, i: int) -> list[tuple[int, int]]:
        """Units to send worker `i` now (taken off the queue)."""
        n = min(max(0, self.want[i] - len(self.held[i])), len(self.queue)) if self.alive[i] else 0
        batch = [self.queue.popleft() for _ in range(n)]
        self.held[i].update(batch)
        return batch

    def done(self, i: int, units: Sequence[tuple[int, int]]) -> None:
        self.held[i].difference_update(units)

    def busy(self, i: int) -> bool:
        """Worker `i` holds units, or could take some: it should have a call outstanding."""
        return self.alive[i] and bool(self.held[i] or self.queue)

    def lost(self, i: int) -> None:
        """Worker `i` died: its units go back to the front of the queue, in order."""
        self.alive[i] = False
        self.queue.extendleft(sorted(self.held[i], reverse=True))
        self.held[i].clear()


def merge_stats(into: RunStats, part: RunStats) -> None:
    """Add a worker batch's counters to the run's (phase seconds add up as engine-seconds)."""
    into.merge(part)


def check_agreement(described: Sequence[tuple]) -> None:
    """Raise unless every worker's `EngineSetup.agreement()` equals worker 0's (names the first field).

    `described`: per worker (EngineSetup, EngineConfig, where it runs, ...) as `describe` returns it.
    """
    ref = described[0][0].agreement()
    for i, (setup, _, where, *_) in enumerate(described[1:], start=1):
        other = setup.agreement()
        if other != ref:
            field = next(k for k in ref if ref[k] != other.get(k))
            raise RuntimeError(f"worker {i} on {where['host']} differs from worker 0 in {field!r}: every "
                               "worker must load the same weights, tokenizer and engine stack")


class RayExecutor:
    """Actors with one engine each, fed from the driver's queue (see module docstring).

    Attributes (after construction): `setup` (the workers' common
    `EngineSetup`), `engine_cfg` (worker 0's resolved engine settings).
    """

    def __init__(self, job, questions, instructions, grader: str, *, workers: int,
                 address: str | None, worker_cpus: float = 1, worker_gpus: float | None = None, log=None):
        ray = import_ray()
        self._ray = ray
        self._log = log or (lambda m: print(m, file=sys.stderr, flush=True))
        self.job = job
        self._owns = False
        local = not ray.is_initialized() and address is None and not os.environ.get("RAY_ADDRESS")
        if local:
            locate_model(job)           # this machine is where the workers run: one line, no Ray started
        env = {"env_vars": worker_env()}
        if ray.is_initialized():
            self._log("using the Ray instance already initialized in this process")
        elif address is None and not os.environ.get("RAY_ADDRESS"):
            ray.init(num_cpus=max(1, math.ceil(workers * worker_cpus)), include_dashboard=False)
            self._owns = True
        else:
            ray.init(address=address)
            self._owns = True
        self.actors: list[Any] = []
        try:
            if not local:
                try:   # where the workers run, with their environment, before any actor starts
                    ray.get(ray.remote(locate_model).options(num_cpus=0, runtime_env=env).remote(job))
                except ray.exceptions.RayTaskError as e:
                    raise _one_line(ray, e) from None
            if worker_gpus is None:
                # On a cluster with GPUs each engine gets its own (`EngineSpec.gpus_per_worker`):
                # vLLM its tensor-parallel group (run by vLLM's multiprocessing backend on the GPUs
                # Ray assigns the actor), transformers one GPU; one that asks for none sees none
                # (`actor_env`).
                has_gpu = ray.cluster_resources().get("GPU", 0) > 0
                spec = ENGINE_SPECS[job.engine.kind]
                worker_gpus = spec.gpus_per_worker(job.engine.tensor_parallel_size) if has_gpu else 0
            actor_cls = ray.remote(ProbeWorker).options(num_cpus=worker_cpus, num_gpus=worker_gpus,
                                                        max_restarts=0, runtime_env=actor_env(worker_gpus))
            self.actors = [actor_cls.remote(job, questions, instructions, grader, i) for i in range(workers)]
            described = self._wait_ready([a.describe.remote() for a in self.actors])
            check_agreement(described)
        except BaseException:
            self.close()
            raise
        self.setup, self.engine_cfg = described[0][0], described[0][1]
        self._where = [d[2] for d in described]
        self._bounds = [d[3] for d in described]
        self._units = [0] * workers
        self._calls = [0] * workers
        self._alive = [True] * workers
        self._index = {(q.group, q.id): k for k, q in enumerate(questions)}

    def _wait_ready(self, refs: list) -> list:
        ray = self._ray
        t0 = time.perf_counter()
        pending = list(refs)
        while pending:
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=60)
            if pending:
                self._log(f"{len(refs) - len(pending)} of {len(refs)} Ray workers ready after "
                          f"{time.perf_counter() - t0:.0f} s (cluster: {ray.available_resources()})")
        try:
            return ray.get(refs)
        except ray.exceptions.RayTaskError as e:
            raise _one_line(ray, e) from None

    def run(self, units: Sequence[tuple[int, int]], on_batch, stats: RunStats) -> None:
        """Probe `units` on the workers; `on_batch(results, stats)` as each worker call returns.

        Every busy worker always has one `advance` call outstanding: the next
        one is sent (with units to top it up) before the last one's results
        are committed, so no engine waits for the driver.
        """
        ray = self._ray
        feed = Feeder(units, self._bounds, self.job.units_per_batch, alive=self._alive)
        calls: dict[Any, int] = {}

        def call(i: int) -> None:
            calls[self.actors[i].advance.remote(feed.top_up(i))] = i

        for i in range(len(self.actors)):
            if feed.busy(i):
                call(i)
        while calls:
            (ref,), _ = ray.wait(list(calls), num_returns=1)
            i = calls.pop(ref)
            try:
                res, part = ray.get(ref)
            except ray.exceptions.RayActorError as e:
                feed.lost(i)                         # one call per worker: it dies once
                self._log(f"Ray worker {i} on {self._where[i]['host']} died "
                          f"({type(e).__name__}); its units go to the others")
                if not any(self._alive):
                    raise RuntimeError("every Ray worker died; the committed units are in the journal: "
                                       "rerun with --resume") from e
                idle = set(range(len(self.actors))) - set(calls.values())
                for j in sorted(idle):
                    if feed.busy(j):
                        call(j)
                continue
            feed.done(i, [(self._index[u.group, u.question], u.trajectory) for u in res])
            if feed.busy(i):
                call(i)                              # before committing: the engine keeps going
            merge_stats(stats, part)
            self._units[i] += len(res)
            self._calls[i] += 1
            on_batch(res, stats)

    def report(self) -> list[dict[str, Any]]:
        """Per worker: where it ran, units done, calls answered, its bound on units in flight, whether it survived."""
        return [{**w, "units": u, "calls": c, "units_in_flight": b, "alive": a}
                for w, u, c, b, a in zip(self._where, self._units, self._calls, self._bounds, self._alive)]

    def close(self) -> None:
        ray = self._ray
        if self.actors:
            try:
                ray.wait([a.close.remote() for a in self.actors], num_returns=len(self.actors), timeout=30)
            except Exception:       # noqa: BLE001 - a dead actor cannot close; it is killed below
                pass
            for a in self.actors:
                try:
                    ray.kill(a)
                except Exception:   # noqa: BLE001
                    pass
            self.actors = []
        if self._owns:
            ray.shutdown()
            self._owns = False
