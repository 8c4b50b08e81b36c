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
    venv = tmp_path / "venv" / "bin"             # otbench's environment: its python and ray beside it
    venv.mkdir(parents=True, exist_ok=True)
    for name in ("otbench", "ray"):
        (venv / name).write_text("#!/bin/sh\nexit 0\n")
        (venv / name).chmod(0o755)
    if not (venv / "python").exists():
        (venv / "python").symlink_to(sys.executable)
    e = {**os.environ, "PATH": f"{bin_dir}:{venv}:{os.environ['PATH']}",
         "SLURM_JOB_NODELIST": "gpu-a[01-03]", "SLURM_GPUS_ON_NODE": gpus, "SLURM_CPUS_ON_NODE": "64",
         "OTBENCH_DRY_RUN": "1", **env}
    r = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=e, timeout=120)
    # the node wait is `PYTHON -c $'<code>' ADDRESS NODES SECONDS`: keep its arguments only
    py = env.get("PYTHON", str(venv / "python"))
    return r, [shlex.split(line) if not line.startswith(py + " ") else [py, *line.split()[-3:]]
               for line in r.stdout.splitlines() if line.strip()]


def test_generated_commands(tmp_path: Path):
    r, cmds = _dry(tmp_path, "job.toml", "runs/out", "--overwrite", TP="2")
    assert r.returncode == 0, r.stderr
    venv = tmp_path / "venv" / "bin"
    ray, py = str(venv / "ray"), str(venv / "python")
    head, w1, w2, wait, probe, stop = cmds
    # every step gets the node's CPUs (cgroup confinement), Ray is the venv's
    assert head[:7] == ["srun", "--nodes=1", "--ntasks=1", "--cpus-per-task=64", "-w", "gpu-a01", ray]
    assert head[7:] == ["start", "--head", "--node-ip-address=gpu-a01", "--port=6379", "--num-cpus=64",
                        "--num-gpus=8", "--block"]
    for cmd, node in ((w1, "gpu-a02"), (w2, "gpu-a03")):
        assert cmd[:7] == ["srun", "--nodes=1", "--ntasks=1", "--cpus-per-task=64", "-w", node, ray]
        assert cmd[7:] == ["start", "--address=gpu-a01:6379", "--num-cpus=64", "--num-gpus=8", "--block"]
    assert wait[0] == py and wait[-3:] == ["gpu-a01:6379", "3", "300"]
    # 3 nodes x 8 GPUs / 2 GPUs per engine = 12 engines; requeue-safe; extra options passed on
    assert probe == ["otbench", "probe", "run", "--config", "job.toml", "--out", "runs/out", "--resume",
                     "--no-progress", "--ray-address", "gpu-a01:6379", "--workers", "12",
                     "--worker-gpus", "2", "--worker-cpus", "1", "--overwrite"]
    # Ray 2.x's `ray stop` has no --address: it stops this node's Ray
    assert stop == [ray, "stop", "--grace-period", "30"]


def test_stop_options_are_ray_s_own():
    ray = pytest.importorskip("ray")
    from ray.scripts.scripts import stop
    names = {o for p in stop.params for o in p.opts}
    assert "--grace-period" in names and "--address" not in names, ray.__version__


def test_batch_directives_fit_ordinary_partitions():
    text = SCRIPT.read_text()
    directives = [x.split()[1] for x in text.splitlines() if x.startswith("#SBATCH")]
    # no time limit of its own: the user's (sbatch --time / SBATCH_TIMELIMIT) or the partition's,
    # never one above a partition's MaxTime that sbatch would reject
    assert not any(d.startswith(("--time", "-t")) for d in directives) and "--signal=B:USR1@300" in directives
    assert "scontrol requeue" in text                    # a run longer than one slot continues
    code = [x for x in text.splitlines() if not x.lstrip().startswith("#")]
    assert not any("hostname --ip-address" in x for x in code)      # can answer 127.0.1.1


def test_the_script_parses():
    if shutil.which("bash") is None:
        pytest.skip("needs bash")
    r = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def _stub(bin_dir: Path, name: str, body: str) -> None:
    (bin_dir / name).write_text("#!/bin/sh\n" + body)
    (bin_dir / name).chmod(0o755)


def _head_address(tmp_path: Path, *, route: str | None, hostname_i: str, peer: str = "gpu-a02",
                  peer_ip: str | None = "10.8.0.12", **env):
    """`head_address PEER` with stand-in getent / ip / hostname (and nothing else on PATH but the shell's)."""
    if shutil.which("bash") is None:
        pytest.skip("needs bash")
    bin_dir = tmp_path / "stubs"
    bin_dir.mkdir(exist_ok=True)
    _stub(bin_dir, "getent", f'echo "{peer_ip}   STREAM {peer}"\n' if peer_ip else "exit 2\n")
    _stub(bin_dir, "ip", f'[ "$*" = "-4 -o route get {peer_ip}" ] || exit 3\necho "{route}"\n' if route is not None
          else "exit 127\n")
    _stub(bin_dir, "hostname", f'[ "$1" = "-I" ] || exit 4\necho "{hostname_i}"\n')
    for tool in ("awk", "sed", "head"):
        (bin_dir / tool).unlink(missing_ok=True)
        (bin_dir / tool).symlink_to(shutil.which(tool))
    e = {"PATH": str(bin_dir), **env}
    r = subprocess.run([shutil.which("bash"), "-c", f'source "{SCRIPT}"; head_address {peer}'],
                       capture_output=True, text=True, env=e, timeout=60)
    return r.returncode, r.stdout.strip()


@pytest.mark.parametrize("route,hostname_i,want", [
    # the route to the other node leaves through the cluster network: its source address
    ("10.8.0.12 dev ib0 src 10.8.0.11 uid 0 \\    cache", "127.0.1.1 172.17.0.1 10.8.0.11", "10.8.0.11"),
    ("10.8.0.12 via 10.8.0.1 dev eth1 src 10.9.3.4 uid 1000", "10.1.1.1 10.9.3.4", "10.9.3.4"),
    # /etc/hosts maps the peer to loopback, or no `ip` command: the first routable address
    ("127.0.0.1 dev lo src 127.0.0.1 uid 0", "127.0.1.1 169.254.3.3 fe80::1 10.8.0.11", "10.8.0.11"),
    (None, "10.8.0.11 192.168.5.5", "10.8.0.11"),
])
def test_head_address_is_the_one_the_other_nodes_reach(tmp_path: Path, route, hostname_i, want):
    assert _head_address(tmp_path, route=route, hostname_i=hostname_i) == (0, want)


def test_head_address_override_and_failure(tmp_path: Path):
    # the documented override wins over everything found
    assert _head_address(tmp_path, route="x dev ib0 src 10.8.0.11", hostname_i="10.8.0.11",
                         OTBENCH_HEAD_IP="10.99.0.1") == (0, "10.99.0.1")
    # a single node (no peer) or an unresolvable one: hostname -I, loopback skipped
    assert _head_address(tmp_path, route=None, hostname_i="127.0.1.1 10.2.0.7", peer_ip=None) == (0, "10.2.0.7")
    # only loopback anywhere: no address, and the script says to set the override
    assert _head_address(tmp_path, route="127.0.0.1 dev lo src 127.0.0.1", hostname_i="127.0.1.1")[0] == 1
    assert "set OTBENCH_HEAD_IP" in SCRIPT.read_text()


def test_dry_run_uses_the_override_address(tmp_path: Path):
    r, cmds = _dry(tmp_path, "job.toml", "out", TP="2", OTBENCH_HEAD_IP="10.99.0.1")
    assert r.returncode == 0, r.stderr
    assert "--node-ip-address=10.99.0.1" in cmds[0] and "--address=10.99.0.1:6379" in cmds[1]


def test_missing_venv_tools_are_refused(tmp_path: Path):
    r, _ = _dry(tmp_path, "job.toml", "out", TP="2", RAY=str(tmp_path / "no-ray"))
    assert r.returncode == 2 and "no-ray: not found beside" in r.stderr


def test_tensor_parallel_size_comes_from_the_job(tmp_path: Path):
    job = tmp_path / "job.toml"
    job.write_text('[model]\nname = "deepseek-r1-distill-qwen-32b"\n[engine]\nkind = "vllm"\n')
    r, cmds = _dry(tmp_path, str(job), "out", RAY_PORT="7000", PYTHON=sys.executable)
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
