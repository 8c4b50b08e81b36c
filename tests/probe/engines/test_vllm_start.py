"""Starting the vLLM engine: no CUDA call before the engine exists, per-device arguments, version floor (issue 13).

The GPU path cannot run on the project's CPU machines, so these tests start
`VLLMEngine` against a stand-in `vllm` package whose platform reports a CUDA
device and whose `LLM` records its keyword arguments. Every CUDA-initialising
function of the real `torch.cuda` is replaced by a tripwire until that `LLM`
is constructed: any call from otbench before then fails the test.
"""

import os
import re
import subprocess
import sys
import types

import pytest
from otbench.probe.engines import EngineConfig, EngineStartError

torch = pytest.importorskip("torch")

# torch.cuda functions that query or initialise the CUDA driver.
CUDA_CALLS = ("is_available", "device_count", "init", "_lazy_init", "current_device", "set_device",
              "get_device_properties", "get_device_name", "get_device_capability", "mem_get_info",
              "synchronize", "is_initialized")
ENV = ("HF_HUB_OFFLINE", "VLLM_CPU_KVCACHE_SPACE", "VLLM_NO_USAGE_STATS", "DO_NOT_TRACK",
       "VLLM_LOGGING_LEVEL", "VLLM_LOGGING_STREAM", "VLLM_WORKER_MULTIPROC_METHOD",
       "PYTORCH_NVML_BASED_CUDA_CHECK", "VLLM_BATCH_INVARIANT")


class _Tok:
    eos_token_id = 2


def _fake_vllm(device: str, version: str, state: dict, *, with_token_ids: bool = True):
    """A `vllm` stand-in: platform `device`, an `LLM` that records its arguments and the env."""

    class LLM:
        def __init__(self, **kw):
            state["engine_built"] = True
            state["kwargs"] = kw
            state["env"] = {k: os.environ.get(k) for k in ENV}
            self.llm_engine = types.SimpleNamespace(
                model_config=types.SimpleNamespace(get_vocab_size=lambda: 100, hf_config=None))

        def get_tokenizer(self):
            return _Tok()

    class SamplingParams:
        __struct_fields__ = ("n", "seed") + (("logprob_token_ids",) if with_token_ids else ())

    platform = types.SimpleNamespace(is_cuda=lambda: device == "cuda", device_type=device)
    mods = {
        "vllm": types.SimpleNamespace(__version__=version, LLM=LLM, SamplingParams=SamplingParams),
        "vllm.inputs": types.SimpleNamespace(TokensPrompt=dict),
        "vllm.platforms": types.SimpleNamespace(current_platform=platform),
    }
    return mods


@pytest.fixture
def start(monkeypatch):
    """start(device, version, **config) -> (engine, state); CUDA calls before LLM() fail."""
    for k in ENV:
        # set, then delete: monkeypatch then restores the variable's absence at teardown
        # even when the engine sets it meanwhile (it must not leak into later tests)
        monkeypatch.setenv(k, "")
        monkeypatch.delenv(k)
    state: dict = {"engine_built": False, "early_cuda": []}

    def tripwire(name, real):
        def call(*a, **k):
            if not state["engine_built"]:
                state["early_cuda"].append(name)
                raise AssertionError(f"torch.cuda.{name} called before the engine was constructed")
            return real(*a, **k)
        return call

    for name in CUDA_CALLS:
        if hasattr(torch.cuda, name):
            monkeypatch.setattr(torch.cuda, name, tripwire(name, getattr(torch.cuda, name)))

    def run(device="cuda", version="0.32.0", with_token_ids=True, **cfg):
        for name, mod in _fake_vllm(device, version, state, with_token_ids=with_token_ids).items():
            monkeypatch.setitem(sys.modules, name, mod)
        from otbench.probe.engines._vllm import VLLMEngine
        e = VLLMEngine(EngineConfig(kind="vllm", model="/models/m", max_model_len=4096, **cfg))
        return e, state
    return run


def test_cuda_start_touches_no_cuda_and_uses_gpu_defaults(start):
    e, st = start("cuda")
    assert st["early_cuda"] == []
    kw = st["kwargs"]
    assert "enforce_eager" not in kw                       # CUDA graphs and compilation on
    assert kw["gpu_memory_utilization"] == 0.9
    assert "enable_chunked_prefill" not in kw and "max_num_batched_tokens" not in kw   # vLLM's default
    assert kw["logprobs_mode"] == "raw_logprobs"            # explicit, not vLLM's default
    assert kw["enable_prefix_caching"] is True and kw["tensor_parallel_size"] == 1
    # the engine core is spawned, and torch's availability check goes through NVML
    assert st["env"]["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"
    assert st["env"]["PYTORCH_NVML_BASED_CUDA_CHECK"] == "1"
    assert st["env"]["VLLM_BATCH_INVARIANT"] is None
    assert e.info()["device"] == "cuda"


def test_cpu_start_keeps_the_cpu_settings(start):
    _, st = start("cpu", version="0.32.0+cpu")
    kw = st["kwargs"]
    assert kw["enforce_eager"] is True
    assert kw["enable_chunked_prefill"] is False and kw["max_num_batched_tokens"] == 8192
    assert "gpu_memory_utilization" not in kw
    assert kw["logprobs_mode"] == "raw_logprobs"
    assert st["env"]["VLLM_CPU_KVCACHE_SPACE"] == "2"


def test_job_settings_override_the_device_defaults(start):
    _, st = start("cuda", enforce_eager=True, chunked_prefill=False, gpu_memory_utilization=0.8,
                  tensor_parallel_size=2, revision="abc123", batch_invariant=True)
    kw = st["kwargs"]
    assert kw["enforce_eager"] is True and kw["enable_chunked_prefill"] is False
    assert kw["gpu_memory_utilization"] == 0.8 and kw["tensor_parallel_size"] == 2
    assert kw["revision"] == kw["tokenizer_revision"] == "abc123"
    assert st["env"]["VLLM_BATCH_INVARIANT"] == "1"


@pytest.mark.parametrize("version,ok", [("0.19.1", False), ("0.10.2", False), ("0.20.0", True),
                                        ("0.32.0+cpu", True), ("1.0.0rc1.dev5+g1234", True)])
def test_version_floor(start, version, ok):
    if ok:
        start("cuda", version=version)
        return
    with pytest.raises(EngineStartError, match=r"^vLLM \S+ is too old: otbench needs vLLM >= 0\.20\.0") as e:
        start("cuda", version=version)
    assert "\n" not in str(e.value)


def test_batch_invariance_is_refused_off_gpu(start):
    with pytest.raises(EngineStartError, match=r"engine.batch_invariant needs vLLM on an NVIDIA GPU .* runs on cpu"):
        start("cpu", batch_invariant=True)


def test_missing_logprob_token_ids_is_refused(start):
    with pytest.raises(EngineStartError, match="has no SamplingParams.logprob_token_ids"):
        start("cuda", with_token_ids=False)


def test_real_vllm_import_checks_cuda_only_through_nvml():
    """With the installed vLLM: importing it and detecting the device never asks the CUDA runtime.

    `torch.cuda.is_available` is called by libraries vLLM imports; it must then
    take torch's NVML path (`PYTORCH_NVML_BASED_CUDA_CHECK=1`), which does not
    initialise the driver, and the start method must already be spawn.
    """
    pytest.importorskip("vllm")
    code = r"""
import os, torch
from otbench.probe.engines import EngineConfig
from otbench.probe.engines import _vllm
seen = []
real = torch.cuda.is_available
def avail():
    seen.append((os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK"), os.environ.get("VLLM_WORKER_MULTIPROC_METHOD")))
    return real()
torch.cuda.is_available = avail
for name in ("init", "_lazy_init", "current_device", "set_device", "get_device_properties"):
    setattr(torch.cuda, name, lambda *a, _n=name, **k: (_ for _ in ()).throw(AssertionError(_n)))
_vllm._prepare_environment(EngineConfig())
import vllm
from vllm import LLM, SamplingParams
_vllm.check_version(vllm.__version__, SamplingParams)
print(_vllm.detect_device(), sorted(set(seen)))
"""
    env = {k: v for k, v in os.environ.items() if k not in ENV}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    device, seen = r.stdout.strip().splitlines()[-1].split(" ", 1)
    assert device == "cpu"                                  # vllm-cpu is a CPU build, whatever the host
    assert seen in ("[]", "[('1', 'spawn')]")


class _FakeNVML:
    """NVML of a node whose physical GPU 3 is mostly taken by another process."""
    G = 1 << 30
    MEM = {"0": (141, 141), "3": (141, 20), "5": (141, 130), "GPU-5a1d": (141, 130)}

    def __init__(self):
        self.calls = []

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, i):
        self.calls.append(("index", i))
        return str(i)

    def nvmlDeviceGetHandleByUUID(self, u):
        self.calls.append(("uuid", u))
        return u

    def nvmlDeviceGetMemoryInfo(self, h):
        total, free = self.MEM[h]
        return types.SimpleNamespace(total=total * self.G, free=free * self.G)


@pytest.mark.parametrize("visible,tp,want", [
    (None, 1, (141.0, 141.0)),              # nothing assigned: GPU 0
    ("5", 1, (141.0, 130.0)),               # the GPU Ray/SLURM gave this engine, not GPU 0
    ("GPU-5a1d", 1, (141.0, 130.0)),        # assigned by UUID
    ("5,3", 2, (141.0, 20.0)),              # a tensor-parallel group: its smallest free memory
])
def test_gpu_memory_is_read_for_the_devices_in_use(monkeypatch, visible, tp, want):
    from otbench.probe.engines import _cuda

    nvml = _FakeNVML()
    monkeypatch.setitem(sys.modules, "vllm.utils", types.SimpleNamespace())
    monkeypatch.setitem(sys.modules, "vllm.utils.import_utils", types.SimpleNamespace(import_pynvml=lambda: nvml))
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert _cuda._gpu_memory_gib(tp) == want


def test_a_gpu_held_by_another_process_is_refused_in_one_line(monkeypatch):
    from otbench.probe.engines import _cuda
    from otbench.probe.engines._interface import EngineStartError

    nvml = _FakeNVML()
    monkeypatch.setitem(sys.modules, "vllm.utils", types.SimpleNamespace())
    monkeypatch.setitem(sys.modules, "vllm.utils.import_utils", types.SimpleNamespace(import_pynvml=lambda: nvml))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    cfg = EngineConfig(kind="vllm", model="/models/m", max_model_len=4096)
    with pytest.raises(EngineStartError, match=r"^/models/m: the GPU has 20\.0 of 141\.0 GiB free, less than "
                                               r"gpu_memory_utilization 0\.9 x 141\.0 = 126\.9 GiB"):
        _cuda.check_gpu_memory(cfg)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    _cuda.check_gpu_memory(cfg)                      # 130 GiB free of 141: enough for 0.9


class _DriverNVML(_FakeNVML):
    """NVML of a node with driver `driver` (supporting CUDA `cuda`, NVML's integer form)."""

    def __init__(self, driver: str, cuda: int):
        super().__init__()
        self.driver, self.cuda = driver, cuda

    def nvmlSystemGetDriverVersion(self):
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self):
        return self.cuda


@pytest.mark.parametrize("runtime,driver,cuda,ok", [
    ("13.0", "580.65.06", 13000, True),       # the CUDA 13.0 GA driver itself
    ("13.0", "580.126.09", 13000, True),      # a later R580
    ("13.0", "570.172.08", 12080, False),     # R570 (CUDA 12.8): torch 2.13's CUDA 13 runtime cannot start
    ("13.0", "535.183.01", 12020, False),     # R535, common on clusters
    ("12.8", "570.26", 12080, True),          # a two-part version compares as such
    ("12.8", "565.57.01", 12070, False),
    ("12.6", "560.28.03", 12060, True),
    ("13.2", "580.65.06", 13000, False),      # a runtime newer than the table: the driver's own CUDA decides
    ("13.2", "595.10.01", 13020, True),
])
def test_driver_table(runtime, driver, cuda, ok):
    from otbench.probe.engines._cuda import check_cuda_driver

    if ok:
        check_cuda_driver(runtime, (driver, cuda))
        return
    with pytest.raises(EngineStartError, match=rf"^the NVIDIA driver {re.escape(driver)} .*CUDA "
                                               rf"{re.escape(runtime)} runtime.*: upgrade the NVIDIA driver") as e:
        check_cuda_driver(runtime, (driver, cuda))
    assert "\n" not in str(e.value)


def _with_nvml(monkeypatch, nvml):
    monkeypatch.setitem(sys.modules, "vllm.utils", types.SimpleNamespace())
    monkeypatch.setitem(sys.modules, "vllm.utils.import_utils", types.SimpleNamespace(import_pynvml=lambda: nvml))


def test_an_old_driver_is_refused_before_the_engine_and_any_cuda_call(start, monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", "13.0")          # the torch of requirements/probe-gpu.txt
    _with_nvml(monkeypatch, _DriverNVML("550.163.01", 12040))
    with pytest.raises(EngineStartError, match=r"^the NVIDIA driver 550\.163\.01 is older than the 580\.65\.06 "
                                               r"that torch's CUDA 13\.0 runtime needs"):
        start("cuda")


def test_a_new_enough_driver_starts_the_engine_without_cuda(start, monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    _with_nvml(monkeypatch, _DriverNVML("580.95.05", 13000))
    e, st = start("cuda")
    assert st["engine_built"] and st["early_cuda"] == []


def test_a_cuda_host_with_a_cpu_torch_is_refused(start, monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", None)
    _with_nvml(monkeypatch, _DriverNVML("580.95.05", 13000))
    with pytest.raises(EngineStartError, match=r"has no CUDA runtime .*install requirements/probe-gpu\.txt"):
        start("cuda")


class _CountNVML(_DriverNVML):
    def __init__(self, count: int):
        super().__init__("580.95.05", 13000)
        self.count = count

    def nvmlDeviceGetCount(self):
        return self.count


@pytest.mark.parametrize("visible,count,tp,ok", [
    (None, 8, 8, True), (None, 2, 4, False),       # NVML's count when nothing is assigned
    ("3", 8, 2, False), ("0,5", 8, 2, True),       # what Ray / SLURM assigned wins
])
def test_tensor_parallelism_beyond_the_visible_gpus_is_refused(start, monkeypatch, visible, count, tp, ok):
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    _with_nvml(monkeypatch, _CountNVML(count))
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    if ok:
        start("cuda", tensor_parallel_size=tp)
        return
    n = len(visible.split(",")) if visible else count
    with pytest.raises(EngineStartError, match=rf"^engine\.tensor_parallel_size {tp} needs {tp} GPUs, but {n} "
                                               rf"(is|are) visible here .*tensor_parallel_size={n}\)") as e:
        start("cuda", tensor_parallel_size=tp)
    assert "\n" not in str(e.value)


def test_a_missing_vllm_is_one_line(monkeypatch):
    from otbench.probe.engines._vllm import VLLMEngine

    monkeypatch.setitem(sys.modules, "vllm", None)          # `import vllm` raises ImportError
    with pytest.raises(EngineStartError, match=r"^engine.kind \"vllm\" needs vLLM, which is not installed .*"
                                               r"requirements/probe-cpu\.txt.*--model transformers"):
        VLLMEngine(EngineConfig(kind="vllm", model="/models/m"))


def test_the_forward_compatibility_package_skips_the_driver_check(monkeypatch):
    from otbench.probe.engines._cuda import check_cuda_driver

    with pytest.raises(EngineStartError):
        check_cuda_driver("13.0", ("535.183.01", 12020))
    monkeypatch.setenv("OTBENCH_CUDA_FORWARD_COMPAT", "1")    # NVML reports the kernel driver only there
    check_cuda_driver("13.0", ("535.183.01", 12020))


def test_vllm_s_kernel_scan_passes_over_llvmlite_in_the_engine_s_process():
    """vLLM 0.32's kernel-override scan (`triton_utils/dispatcher._rebind_kernels`) reads `vars()` of
    every module attribute with a `__dict__`; llvmlite's library wrapper (numba's) answers `__dict__`
    with a wrapped C function, so the scan fails in a process that imported numba, as vLLM's
    single-process mode does. Run in a fresh process: vLLM's own scan, before and after the guard."""
    pytest.importorskip("vllm")
    pytest.importorskip("llvmlite")
    script = (
        "from llvmlite.binding import ffi\n"
        "from vllm.triton_utils import dispatcher\n"
        "from otbench.probe.engines._vllm import _answer_kernel_scan\n"
        "try:\n"
        "    dispatcher._rebind_kernels([])\n"
        "    print('unguarded: passed')\n"
        "except AttributeError as e:\n"
        "    print('unguarded:', e)\n"
        "_answer_kernel_scan()\n"
        "dispatcher._rebind_kernels([])\n"
        "assert vars(ffi.lib) == {}\n"
        "print('guarded: passed')\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    # the pinned vLLM fails without the guard; a vLLM that passes unguarded needs it no more
    assert "unguarded: '_lib_fn_wrapper' object has no attribute 'get'" in r.stdout, r.stdout
    assert r.stdout.rstrip().endswith("guarded: passed")
