#!/usr/bin/env bash
# Run an otbench probe job on a SLURM allocation: Ray on every node, one vLLM engine
# per `tensor_parallel_size` GPUs, the driver (queue, journal, output) on the first node.
#
#   sbatch --time=12:00:00 --nodes=4 --gpus-per-node=8 artifacts/slurm/probe.sh job.toml runs/qwen3-4b
#
# The time limit is yours: `sbatch --time=...` (or SBATCH_TIMELIMIT in the environment);
# without one SLURM gives the partition's DefaultTime (else its MaxTime). The script sets
# none: a fixed limit above a partition's MaxTime makes sbatch reject the job.
# Requeue-safe: the run always passes --resume, so a preempted or requeued job
# continues from its journal (OUT.journal) and gives the same set. Five minutes
# before the time limit SLURM signals the script (--signal=B:USR1@300), which
# requeues the job: a run longer than one time slot continues in the next one.
# The head's address is the one the other nodes reach it at (`head_address`: the
# source address of the head's route to the second node, else its first address
# that is neither loopback nor link-local), never `hostname --ip-address`, which
# can answer 127.0.1.1 from /etc/hosts or an interface the other nodes cannot reach
# (the workers then never join and the script gives up after RAY_WAIT_S).
# Every srun step gets the node's CPUs (-c): under cgroup confinement a step
# without it gets one CPU, shared by the node's engines and their graders.
# Python and Ray are the ones installed beside the otbench command (its venv).
# Environment (all optional):
#   OTBENCH         the otbench command          (default: otbench on PATH)
#   PYTHON, RAY     python and ray               (default: beside the otbench command)
#   RAY_PORT        the head's GCS port           (default: 6379)
#   RAY_WAIT_S      how long to wait for the nodes to join (default: 300)
#   OTBENCH_HEAD_IP the head's address as the other nodes reach it (default: found, see above)
#   TP              GPUs per engine               (default: the job's engine.tensor_parallel_size)
#   OTBENCH_DRY_RUN=1  print the commands instead of running them (used by the tests)
#SBATCH --job-name=otbench-probe
#SBATCH --ntasks-per-node=1
#SBATCH --exclusive
#SBATCH --requeue
#SBATCH --signal=B:USR1@300

head_address() {  # PEER: the address of this node that PEER reaches (printed), or fail
    if [ -n "${OTBENCH_HEAD_IP:-}" ]; then echo "$OTBENCH_HEAD_IP"; return 0; fi
    local peer=${1:-} peer_ip="" addr=""
    if [ -n "$peer" ]; then
        peer_ip=$(getent ahostsv4 "$peer" 2>/dev/null | awk 'NR == 1 {print $1}') || peer_ip=""
    fi
    if [ -n "$peer_ip" ]; then
        # the kernel's choice of source address for packets to the peer: the right interface
        addr=$(ip -4 -o route get "$peer_ip" 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -n 1) \
            || addr=""
        case $addr in 127.*|169.254.*|"") addr="" ;; *) echo "$addr"; return 0 ;; esac
    fi
    for addr in $(hostname -I 2>/dev/null); do
        case $addr in 127.*|169.254.*|*:*) continue ;; esac
        echo "$addr"; return 0
    done
    return 1
}

# Sourced (the tests do, to call head_address): define the function only.
if [ "${BASH_SOURCE[0]}" != "$0" ]; then return 0; fi
set -euo pipefail

if [ $# -lt 2 ]; then
    echo "usage: sbatch [sbatch options] $0 JOB.toml OUT [extra otbench probe run options]" >&2
    exit 2
fi
JOB=$1; OUT=$2; shift 2
: "${SLURM_JOB_NODELIST:?not inside a SLURM allocation (run it with sbatch or salloc)}"
OTBENCH=${OTBENCH:-otbench}
if ! BIN=$(dirname "$(command -v "$OTBENCH")"); then
    echo "$0: $OTBENCH: no such command (activate otbench's environment or set OTBENCH)" >&2
    exit 2
fi
PYTHON=${PYTHON:-$BIN/python}
RAY=${RAY:-$BIN/ray}
for exe in "$PYTHON" "$RAY"; do
    if [ ! -x "$exe" ]; then
        echo "$0: $exe: not found beside $OTBENCH (set PYTHON / RAY)" >&2
        exit 2
    fi
done
PORT=${RAY_PORT:-6379}
WAIT_S=${RAY_WAIT_S:-300}
DRY=${OTBENCH_DRY_RUN:-}

run() {  # run a command, or print it in dry-run mode
    if [ -n "$DRY" ]; then printf '%q ' "$@"; echo; else "$@"; fi
}
run_bg() {  # the same in the background (printed in order in dry-run mode)
    if [ -n "$DRY" ]; then run "$@"; else "$@" & fi
}

mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
HEAD=${NODES[0]}
GPUS=${SLURM_GPUS_ON_NODE:-0}
CPUS=${SLURM_CPUS_ON_NODE:-${SLURM_CPUS_PER_TASK:-1}}
PEER=${NODES[1]:-}
if [ -n "${OTBENCH_HEAD_IP:-}" ]; then
    HEAD_IP=$OTBENCH_HEAD_IP
elif [ -n "$DRY" ]; then
    HEAD_IP=$HEAD
elif ! HEAD_IP=$(srun --nodes=1 --ntasks=1 -c 1 -w "$HEAD" bash -c "$(declare -f head_address); head_address $PEER"); then
    echo "$0: found no address of $HEAD that reaches ${PEER:-the other nodes}: set OTBENCH_HEAD_IP" >&2
    exit 2
fi
if [ -z "$DRY" ]; then
    echo "Ray head $HEAD at $HEAD_IP; time limit $(squeue -h -j "$SLURM_JOB_ID" -o %l 2>/dev/null || echo unknown)" >&2
fi
ADDRESS="$HEAD_IP:$PORT"
TP=${TP:-$("$PYTHON" -c "import sys; from otbench.probe.stp import load_job; print(load_job(sys.argv[1]).engine.tensor_parallel_size)" "$JOB")}
if [ "$GPUS" -gt 0 ]; then
    # an engine's tensor-parallel ranks stay on one node
    WORKERS=$(( ${#NODES[@]} * (GPUS / TP) ))
    WORKER_GPUS=$TP
else
    WORKERS=${#NODES[@]}
    WORKER_GPUS=0
fi
if [ "$WORKERS" -lt 1 ]; then
    echo "$0: nodes with $GPUS GPUs each cannot hold one engine of $TP GPUs (tensor parallelism stays in a node)" >&2
    exit 2
fi

# Ray: the head on the first node, one worker per other node; each srun step blocks
# for the life of the allocation and is ended with it.
run_bg srun --nodes=1 --ntasks=1 --cpus-per-task="$CPUS" -w "$HEAD" "$RAY" start --head --node-ip-address="$HEAD_IP" --port="$PORT" \
    --num-cpus="$CPUS" --num-gpus="$GPUS" --block
for node in "${NODES[@]:1}"; do
    run_bg srun --nodes=1 --ntasks=1 --cpus-per-task="$CPUS" -w "$node" "$RAY" start --address="$ADDRESS" \
        --num-cpus="$CPUS" --num-gpus="$GPUS" --block
done
run "$PYTHON" -c "
import sys, time, ray
want, deadline = int(sys.argv[2]), time.monotonic() + float(sys.argv[3])
while True:
    try:
        ray.init(address=sys.argv[1], logging_level='ERROR')
        alive = sum(1 for n in ray.nodes() if n['Alive'])
        ray.shutdown()
    except Exception:
        alive = 0
    if alive >= want:
        break
    if time.monotonic() > deadline:
        sys.exit(f'only {alive} of {want} Ray nodes joined in {sys.argv[3]} s')
    time.sleep(5)
" "$ADDRESS" "${#NODES[@]}" "$WAIT_S"

status=0
if [ -n "$DRY" ]; then
    run "$OTBENCH" probe run --config "$JOB" --out "$OUT" --resume --no-progress \
        --ray-address "$ADDRESS" --workers "$WORKERS" --worker-gpus "$WORKER_GPUS" --worker-cpus 1 "$@"
else
    # In the background, so the time-limit signal is handled while it runs: requeue (the
    # next slot resumes from the journal), then stop the run.
    "$OTBENCH" probe run --config "$JOB" --out "$OUT" --resume --no-progress \
        --ray-address "$ADDRESS" --workers "$WORKERS" --worker-gpus "$WORKER_GPUS" --worker-cpus 1 "$@" &
    probe=$!
    trap 'echo "time limit near: requeueing job $SLURM_JOB_ID" >&2; scontrol requeue "$SLURM_JOB_ID"; kill -TERM "$probe"' USR1
    wait "$probe" || status=$?
    if kill -0 "$probe" 2>/dev/null; then wait "$probe" || status=$?; fi   # wait returned for the signal
fi
# `ray stop` (Ray 2.x: --force / --grace-period only) stops this node's Ray; the other
# nodes' `ray start --block` steps end with the allocation.
run "$RAY" stop --grace-period 30 || echo "$0: ray stop failed (its processes end with the job)" >&2
exit $status
