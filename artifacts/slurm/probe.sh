#!/usr/bin/env bash
# Run an otbench probe job on a SLURM allocation: Ray on every node, one vLLM engine
# per `tensor_parallel_size` GPUs, the driver (queue, journal, output) on the first node.
#
#   sbatch --nodes=4 --gpus-per-node=8 artifacts/slurm/probe.sh job.toml runs/qwen3-4b
#
# Requeue-safe: the run always passes --resume, so a preempted or requeued job
# continues from its journal (OUT.journal) and gives the same set.
# Environment (all optional):
#   OTBENCH         the otbench command          (default: otbench)
#   RAY_PORT        the head's GCS port           (default: 6379)
#   RAY_WAIT_S      how long to wait for the nodes to join (default: 300)
#   TP              GPUs per engine               (default: the job's engine.tensor_parallel_size)
#   OTBENCH_DRY_RUN=1  print the commands instead of running them (used by the tests)
#SBATCH --job-name=otbench-probe
#SBATCH --ntasks-per-node=1
#SBATCH --exclusive
#SBATCH --requeue
#SBATCH --time=7-00:00:00
set -euo pipefail

if [ $# -lt 2 ]; then
    echo "usage: sbatch [sbatch options] $0 JOB.toml OUT [extra otbench probe run options]" >&2
    exit 2
fi
JOB=$1; OUT=$2; shift 2
: "${SLURM_JOB_NODELIST:?not inside a SLURM allocation (run it with sbatch or salloc)}"
OTBENCH=${OTBENCH:-otbench}
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
if [ -n "$DRY" ]; then
    HEAD_IP=$HEAD
else
    HEAD_IP=$(srun --nodes=1 --ntasks=1 -w "$HEAD" hostname --ip-address | awk '{print $1}')
fi
ADDRESS="$HEAD_IP:$PORT"
TP=${TP:-$(python3 -c "import sys; from otbench.probe.stp import load_job; print(load_job(sys.argv[1]).engine.tensor_parallel_size)" "$JOB")}
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
run_bg srun --nodes=1 --ntasks=1 -w "$HEAD" ray start --head --node-ip-address="$HEAD_IP" --port="$PORT" \
    --num-cpus="$CPUS" --num-gpus="$GPUS" --block
for node in "${NODES[@]:1}"; do
    run_bg srun --nodes=1 --ntasks=1 -w "$node" ray start --address="$ADDRESS" \
        --num-cpus="$CPUS" --num-gpus="$GPUS" --block
done
run python3 -c "
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
run "$OTBENCH" probe run --config "$JOB" --out "$OUT" --resume --no-progress \
    --ray-address "$ADDRESS" --workers "$WORKERS" --worker-gpus "$WORKER_GPUS" --worker-cpus 1 "$@" \
    || status=$?
run ray stop --address="$ADDRESS" || true
exit $status
