"""The SLURM recipe (artifacts/slurm/probe.sh): the commands it generates for an allocation (issue 13).

Run in dry-run mode with a stand-in `scontrol`, so no SLURM or Ray is needed:
the test checks the Ray head and worker starts, the wait for the nodes, and the
probe command (workers = GPUs / tensor-parallel size, always --resume).
"""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "artifacts" / "slurm" / "probe.sh"


def _dry(tmp_path: Path, *args, nodes=("gpu-a01", "gpu-a02", "gpu-a03"), gpus="8", **env):
    if shutil.which("bash") is None:
        pytest.skip("needs bash")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    scontrol = bin_dir / "scontrol"
    scontrol.write_text("#!/bin/sh\n" + "".join(f"echo {n}\n" for n in nodes))
    scontrol.chmod(0o755)
    e = {**os.environ, "PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
         "SLURM_JOB_NODELIST": "gpu-a[01-03]", "SLURM_GPUS_ON_NODE": gpus, "SLURM_CPUS_ON_NODE": "64",
         "OTBENCH_DRY_RUN": "1", **env}
    r = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=e, timeout=120)
    # the node wait is `python3 -c $'<code>' ADDRESS NODES SECONDS`: keep its arguments only
    return r, [shlex.split(line) if not line.startswith("python3 ") else ["python3", *line.split()[-3:]]
               for line in r.stdout.splitlines() if line.strip()]


def test_generated_commands(tmp_path: Path):
    r, cmds = _dry(tmp_path, "job.toml", "runs/out", "--overwrite", TP="2")
    assert r.returncode == 0, r.stderr
    head, w1, w2, wait, probe, stop = cmds
    assert head[:6] == ["srun", "--nodes=1", "--ntasks=1", "-w", "gpu-a01", "ray"]
    assert head[6:] == ["start", "--head", "--node-ip-address=gpu-a01", "--port=6379", "--num-cpus=64",
                        "--num-gpus=8", "--block"]
    for cmd, node in ((w1, "gpu-a02"), (w2, "gpu-a03")):
        assert cmd[:5] == ["srun", "--nodes=1", "--ntasks=1", "-w", node]
        assert cmd[5:] == ["ray", "start", "--address=gpu-a01:6379", "--num-cpus=64", "--num-gpus=8", "--block"]
    assert wait[0] == "python3" and wait[-3:] == ["gpu-a01:6379", "3", "300"]
    # 3 nodes x 8 GPUs / 2 GPUs per engine = 12 engines; requeue-safe; extra options passed on
    assert probe == ["otbench", "probe", "run", "--config", "job.toml", "--out", "runs/out", "--resume",
                     "--no-progress", "--ray-address", "gpu-a01:6379", "--workers", "12",
                     "--worker-gpus", "2", "--worker-cpus", "1", "--overwrite"]
    assert stop == ["ray", "stop", "--address=gpu-a01:6379"]


def test_tensor_parallel_size_comes_from_the_job(tmp_path: Path):
    job = tmp_path / "job.toml"
    job.write_text('[model]\nname = "deepseek-r1-distill-qwen-32b"\n[engine]\nkind = "vllm"\n')
    r, cmds = _dry(tmp_path, str(job), "out", RAY_PORT="7000")
    assert r.returncode == 0, r.stderr
    probe = cmds[4]
    assert probe[probe.index("--workers") + 1] == "12" and probe[probe.index("--worker-gpus") + 1] == "2"
    assert probe[probe.index("--ray-address") + 1] == "gpu-a01:7000"


def test_refusals(tmp_path: Path):
    r, _ = _dry(tmp_path, "job.toml")
    assert r.returncode == 2 and "usage:" in r.stderr
    r, _ = _dry(tmp_path, "job.toml", "out", gpus="1", TP="2")
    assert r.returncode == 2 and "cannot hold one engine of 2 GPUs" in r.stderr
    r, cmds = _dry(tmp_path, "job.toml", "out", gpus="3", TP="2")    # 1 engine per node, 1 GPU idle
    probe = cmds[4]
    assert r.returncode == 0 and probe[probe.index("--workers") + 1] == "3"
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_NODELIST"}
    r = subprocess.run(["bash", str(SCRIPT), "job.toml", "out"], capture_output=True, text=True, env=env)
    assert r.returncode != 0 and "not inside a SLURM allocation" in r.stderr
