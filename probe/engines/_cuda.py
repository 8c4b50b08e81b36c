"""What the vLLM engine checks on an NVIDIA host before it starts, through NVML only (docs/rules.md).

Nothing here initialises CUDA: NVML (`vllm.utils.import_utils.import_pynvml`,
the NVML vLLM's own platform detection uses) answers without a CUDA context,
so the engine core still creates the first one in its own process. Each
check refuses in one line that names the fix (`EngineStartError`), or stays
silent when NVML does not answer (vLLM's own start then decides).

The driver check: a torch wheel is built against one CUDA runtime
(`torch.version.cuda`, a constant of the wheel, read without CUDA), and
that runtime needs a driver at least as new as NVIDIA's table "CUDA Toolkit
and Corresponding Driver Versions" (CUDA Toolkit release notes, Linux
x86_64, the GA release of each version): `MIN_DRIVER` below. Without this
check an R535-R570 driver passes NVML detection and the memory check, then
the engine core dies in a traceback at CUDA initialisation (vLLM 0.32
`v1/worker/gpu_worker.py`, `init_device`). NVIDIA's forward-compatibility
package runs a newer CUDA on an older kernel driver, which NVML still
reports: `OTBENCH_CUDA_FORWARD_COMPAT=1` skips the driver check there.
"""

import os

from ._interface import EngineConfig, EngineStartError

MIN_DRIVER: dict[tuple[int, int], tuple[int, ...]] = {
    (11, 8): (520, 61, 5),
    (12, 0): (525, 60, 13),
    (12, 1): (530, 30, 2),
    (12, 2): (535, 54, 3),
    (12, 3): (545, 23, 6),
    (12, 4): (550, 54, 14),
    (12, 5): (555, 42, 2),
    (12, 6): (560, 28, 3),
    (12, 8): (570, 26),
    (12, 9): (575, 51, 3),
    (13, 0): (580, 65, 6),
}
"""The oldest Linux driver of each CUDA runtime (major, minor): NVIDIA's table for the GA toolkit.
A runtime not listed (newer than this table) is checked against the CUDA version the driver
itself reports (`nvmlSystemGetCudaDriverVersion`), which must be at least the runtime's."""


def _nvml():
    from vllm.utils.import_utils import import_pynvml

    return import_pynvml()


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in str(text).strip().split(".") if x.isdigit())


def _dotted(v: tuple[int, ...]) -> str:
    return ".".join(f"{x:02d}" if i else str(x) for i, x in enumerate(v))


def driver_versions() -> tuple[str, int] | None:
    """(driver version, e.g. "580.65.06"; CUDA version the driver supports, e.g. 13000) through NVML,
    or None when NVML does not answer."""
    try:
        nvml = _nvml()
        nvml.nvmlInit()
        try:
            drv = nvml.nvmlSystemGetDriverVersion()
            cuda = int(nvml.nvmlSystemGetCudaDriverVersion())
        finally:
            nvml.nvmlShutdown()
    except Exception:  # no NVML here: vLLM's own start decides
        return None
    return (drv.decode() if isinstance(drv, bytes) else str(drv)), cuda


def check_cuda_driver(torch_cuda: str | None = None, versions: tuple[str, int] | None = None) -> None:
    """Refuse, in one line naming the fix, a driver older than the installed torch's CUDA runtime needs.

    `torch_cuda` defaults to `torch.version.cuda` and `versions` to `driver_versions()` (both read
    without initialising CUDA); nothing is checked when NVML does not answer.
    """
    if os.environ.get("OTBENCH_CUDA_FORWARD_COMPAT") == "1":
        return          # NVIDIA's forward-compatibility package: NVML reports the kernel driver only
    if versions is None:
        versions = driver_versions()
        if versions is None:
            return
    if torch_cuda is None:
        import torch

        torch_cuda = torch.version.cuda
        if torch_cuda is None:
            raise EngineStartError(f"torch {torch.__version__} has no CUDA runtime but vLLM runs on an "
                                   "NVIDIA GPU here: install requirements/probe-gpu.txt (its CUDA torch)")
    driver, driver_cuda = versions
    runtime = _version_tuple(torch_cuda)[:2]
    need = MIN_DRIVER.get(runtime)
    have = _version_tuple(driver)
    rt = ".".join(map(str, runtime))
    fix = ("upgrade the NVIDIA driver, or install a torch (and vLLM) built for an older CUDA; with NVIDIA's "
           "forward-compatibility package set OTBENCH_CUDA_FORWARD_COMPAT=1 (docs/guides/gpu.md, the CUDA stack)")
    if need is not None:
        if have and have < need:
            raise EngineStartError(f"the NVIDIA driver {driver} is older than the {_dotted(need)} that "
                                   f"torch's CUDA {rt} runtime needs: {fix}")
        return
    supported = (driver_cuda // 1000, driver_cuda % 1000 // 10)
    if driver_cuda > 0 and supported < runtime:
        raise EngineStartError(f"the NVIDIA driver {driver} supports CUDA up to "
                               f"{supported[0]}.{supported[1]}, older than torch's CUDA {rt} runtime: {fix}")


def visible_devices(environ=None) -> list[str] | None:
    """The entries of CUDA_VISIBLE_DEVICES (indices or GPU-/MIG- UUIDs), None when it is unset."""
    env = os.environ if environ is None else environ
    raw = env.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return None
    return [x.strip() for x in raw.split(",") if x.strip()]


def gpu_count() -> int | None:
    """GPUs this process may use: the entries of CUDA_VISIBLE_DEVICES, else NVML's count; None when
    NVML does not answer."""
    names = visible_devices()
    if names is not None:
        return len(names)
    try:
        nvml = _nvml()
        nvml.nvmlInit()
        try:
            return int(nvml.nvmlDeviceGetCount())
        finally:
            nvml.nvmlShutdown()
    except Exception:  # no NVML: vLLM's own start decides
        return None


def check_devices(config: EngineConfig) -> None:
    """Refuse, in one line, a tensor-parallel group larger than the GPUs this process may use."""
    n = gpu_count()
    tp = config.tensor_parallel_size
    if n is not None and tp > n:
        raise EngineStartError(f"engine.tensor_parallel_size {tp} needs {tp} GPUs, but {n} "
                               f"{'is' if n == 1 else 'are'} visible here (CUDA_VISIBLE_DEVICES / NVML): set "
                               f"it to at most {n} (--model-args tensor_parallel_size={max(n, 1)}) or run on a "
                               f"node with {tp}")


def _gpu_memory_gib(tensor_parallel_size: int) -> tuple[float, float] | None:
    """(total, free) GiB of the GPU(s) this engine will use, the smallest of its tensor-parallel group,
    through NVML (no CUDA initialisation), or None when NVML does not answer.

    The devices are the first `tensor_parallel_size` of CUDA_VISIBLE_DEVICES (what Ray or SLURM
    assigned: NVML numbers all physical GPUs, so a visible index or UUID is looked up as such),
    else GPUs 0.. . Free memory is what vLLM 0.32 checks at start (`v1/worker/utils.request_memory`:
    free must hold gpu_memory_utilization x total), so a GPU another process holds is caught here.
    """
    try:
        nvml = _nvml()
        nvml.nvmlInit()
        try:
            names = visible_devices()
            names = names[:tensor_parallel_size] if names is not None else \
                [str(i) for i in range(tensor_parallel_size)]
            mems = []
            for n in names:
                h = nvml.nvmlDeviceGetHandleByIndex(int(n)) if n.isdigit() else \
                    nvml.nvmlDeviceGetHandleByUUID(n)
                mems.append(nvml.nvmlDeviceGetMemoryInfo(h))
            if not mems:
                return None
            return min(m.total for m in mems) / float(1 << 30), min(m.free for m in mems) / float(1 << 30)
        finally:
            nvml.nvmlShutdown()
    except Exception:  # an estimate only: vLLM's own profile run still decides
        return None


def check_gpu_memory(config: EngineConfig) -> None:
    """Refuse, with the numbers, a job whose weights + one full-context KV cache cannot fit on its GPUs,
    or whose GPUs have less free memory than vLLM will ask for."""
    from otbench.probe.config import check_fits, estimate_memory

    mem = _gpu_memory_gib(config.tensor_parallel_size)
    if mem is None:
        return
    total, free = mem
    want = config.gpu_memory_utilization * total
    if free < want:
        raise EngineStartError(f"{config.model}: the GPU has {free:.1f} of {total:.1f} GiB free, less than "
                               f"gpu_memory_utilization {config.gpu_memory_utilization} x {total:.1f} = "
                               f"{want:.1f} GiB that vLLM will ask for (another process holds the rest): "
                               "free it or lower engine.gpu_memory_utilization")
    est = estimate_memory(config.model, max_model_len=config.max_model_len,
                          tensor_parallel_size=config.tensor_parallel_size)
    if est is None:
        return
    try:
        check_fits(est, gpu_gib=total, utilization=config.gpu_memory_utilization,
                   tensor_parallel_size=config.tensor_parallel_size, max_model_len=config.max_model_len)
    except ValueError as e:
        raise EngineStartError(f"{config.model}: {e}") from None
