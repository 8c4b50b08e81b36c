"""Data-parallel probing on Ray: one engine per actor, fed batches of work units (issue 6).

`RayExecutor` starts `workers` actors (`ProbeWorker`), each opening its own
engine (vLLM with tensor parallelism inside as vLLM supports it, or
transformers) on whatever node Ray places it, and checks that every worker
sees the same model fingerprint, tokenizer, prompts, engine stack and
device: units from different workers are interchangeable only then. The
driver (the process running `run_job`) keeps the queue of pending units,
hands each actor up to two batches at a time (one running, one waiting, so
an engine never idles while the driver commits), and is the only writer
of the journal and the output: actors return `UnitResult`s, never touch
files. A batch lost with a dead actor goes back to the queue for the
others; if every actor dies the run stops, and `--resume` continues from
the journal.

Ray is an optional dependency, imported only here and only when a run asks
for workers or a cluster (`--workers N`, `--ray-address ADDR`). Without an
address (and no `RAY_ADDRESS` in the environment) a local Ray instance is
started and stopped afterwards; an already-initialized Ray (e.g. a test
session's) is used as is. On a cluster every node needs the same otbench
install and the model folder at the same path (the job's `model.path`);
workers check that they loaded identical weights.
"""

import collections
import math
import os
import socket
import sys
import time
from collections.abc import Sequence
from typing import Any

from ._loop import PhaseStats, RunStats

IN_FLIGHT = 2
"""Batches queued per actor: one running, one ready to start."""


class RayMissingError(ImportError):
    """Ray is needed (workers or a cluster were asked for) but not installed."""


def import_ray():
    """The `ray` module, or a `RayMissingError` that says how to install it."""
    try:
        import ray
    except ImportError:
        raise RayMissingError("multi-worker probing (--workers > 1 or --ray-address) needs Ray: "
                          "pip install 'ray>=2.40' (the probe extra installs it)") from None
    return ray


class ProbeWorker:
    """One engine inside a Ray actor (wrapped by `ray.remote` at run time)."""

    def __init__(self, job, questions, instructions, grader: str, index: int):
        from otbench.probe.engines import open_engine
        from otbench.probe.grading import open_grader

        from ._setup import prepare, resolve_engine_config

        def log(msg):
            print(f"[worker {index}] {msg}", file=sys.stderr, flush=True)

        self.job, self.questions = job, questions
        self.engine_cfg = resolve_engine_config(job, log)
        log(f"starting the {self.engine_cfg.kind} engine on {self.engine_cfg.model} ...")
        self.engine = open_engine(self.engine_cfg)
        self.tok, self.fmt, self.setup = prepare(job, self.engine_cfg, self.engine, questions, instructions)
        self.grade, self._grade_close = open_grader(grader)[1:]
        self.where = {"worker": index, "host": socket.gethostname(), "pid": os.getpid()}

    def describe(self):
        """(EngineSetup, EngineConfig, where this worker runs)."""
        return self.setup, self.engine_cfg, self.where

    def probe(self, units: Sequence[tuple[int, int]]):
        """(unit results, this batch's RunStats) for a batch of (question, trajectory) units."""
        from ._imported import think_results
        from ._loop import probe_units

        job = self.job
        stats = RunStats()
        # Within a batch the engine streams (`stream_units`); between batches this
        # synchronous actor waits for the driver to send the next one.
        res = probe_units(self.engine, self.fmt, model=job.model, questions=self.questions,
                          prompts=self.setup.prompts, units=list(units), P=job.P, b=job.b,
                          thinking_limit=job.thinking_limit, answer_limit=job.answer_limit,
                          sampling=job.sampling, grade_batch=self.grade, tokenizer=self.tok, stats=stats,
                          given=think_results(job, self.questions, self.fmt))
        return res, stats

    def close(self) -> None:
        self._grade_close()
        self.engine.close()


def merge_stats(into: RunStats, part: RunStats) -> None:
    """Add a worker batch's counters to the run's (phase seconds add up as engine-seconds)."""
    for name in ("think", "probe", "signal"):
        p: PhaseStats = getattr(part, name)
        getattr(into, name).add(p.requests, p.prompt_tokens, p.generated, p.seconds)
    into.grading_seconds += part.grading_seconds
    into.wall_seconds += part.wall_seconds
    into.busy_seconds += part.busy_seconds
    into.cache_queries += part.cache_queries
    into.cache_hits += part.cache_hits


def check_agreement(described: Sequence[tuple[Any, Any, dict]]) -> None:
    """Raise unless every worker's `EngineSetup.agreement()` equals worker 0's (names the first field)."""
    ref = described[0][0].agreement()
    for i, (setup, _, where) in enumerate(described[1:], start=1):
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
            if worker_gpus is None:
                # On a cluster with GPUs each engine gets its own: vLLM its tensor-parallel
                # group (run by vLLM's multiprocessing backend on the GPUs Ray assigns the
                # actor), transformers one GPU. Ray hides GPUs from actors that ask for none.
                has_gpu = ray.cluster_resources().get("GPU", 0) > 0
                worker_gpus = (job.engine.tensor_parallel_size if job.engine.kind == "vllm" else 1) \
                    if has_gpu else 0
            actor_cls = ray.remote(ProbeWorker).options(num_cpus=worker_cpus, num_gpus=worker_gpus,
                                                        max_restarts=0)
            self.actors = [actor_cls.remote(job, questions, instructions, grader, i) for i in range(workers)]
            described = self._wait_ready([a.describe.remote() for a in self.actors])
            check_agreement(described)
        except BaseException:
            self.close()
            raise
        self.setup, self.engine_cfg = described[0][0], described[0][1]
        self._where = [d[2] for d in described]
        self._units = [0] * workers
        self._batches = [0] * workers
        self._alive = [True] * workers

    def _wait_ready(self, refs: list) -> list:
        ray = self._ray
        t0 = time.perf_counter()
        pending = list(refs)
        while pending:
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=60)
            if pending:
                self._log(f"{len(refs) - len(pending)} of {len(refs)} Ray workers ready after "
                          f"{time.perf_counter() - t0:.0f} s (cluster: {ray.available_resources()})")
        return ray.get(refs)

    def run(self, units: Sequence[tuple[int, int]], on_batch, stats: RunStats) -> None:
        """Probe `units` in batches of `units_per_batch`; `on_batch(results, stats)` per finished batch."""
        ray = self._ray
        upb = self.job.units_per_batch
        queue = collections.deque(list(units[i:i + upb]) for i in range(0, len(units), upb))
        inflight: dict[Any, tuple[int, list]] = {}
        load = [0] * len(self.actors)

        def feed() -> None:
            for i, actor in enumerate(self.actors):
                while self._alive[i] and load[i] < IN_FLIGHT and queue:
                    batch = queue.popleft()
                    inflight[actor.probe.remote(batch)] = (i, batch)
                    load[i] += 1

        feed()
        while inflight:
            (ref,), _ = ray.wait(list(inflight), num_returns=1)
            i, batch = inflight.pop(ref)
            load[i] -= 1
            try:
                res, part = ray.get(ref)
            except ray.exceptions.RayActorError as e:
                queue.appendleft(batch)
                if self._alive[i]:
                    self._alive[i] = False
                    self._log(f"Ray worker {i} on {self._where[i]['host']} died "
                              f"({type(e).__name__}); its batches go to the others")
                if not any(self._alive):
                    raise RuntimeError("every Ray worker died; the committed units are in the journal: "
                                       "rerun with --resume") from e
                feed()
                continue
            merge_stats(stats, part)
            self._units[i] += len(res)
            self._batches[i] += 1
            on_batch(res, stats)
            feed()

    def report(self) -> list[dict[str, Any]]:
        """Per worker: where it ran, units and batches done, whether it survived."""
        return [{**w, "units": u, "batches": b, "alive": a}
                for w, u, b, a in zip(self._where, self._units, self._batches, self._alive)]

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
