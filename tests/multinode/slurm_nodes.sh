# shellcheck shell=bash
# Sourced inside scripts/testbed: a Slurm cluster across the bed's nodes, run as root.
#   start_node_cluster DIR   munged (a generated key; its socket is a file every node reaches),
#                            slurmctld on node1 (10.77.0.1), one `slurmd -N nodeK` in each node's
#                            namespaces; each node declares CLUSTER_CPUS CPUs (default 4, so
#                            that 2 tasks per node fit a small machine); state under DIR;
#                            exports SLURM_CONF; returns 77 (skip) where the daemons cannot start
#   on_head COMMAND...       COMMAND on node1, the login node (sbatch, scontrol, squeue, ...)
#   stop_node_cluster        cancels the jobs and stops the daemons it started (by PID); the
#                            bed's teardown removes whatever is left in the nodes
# Partition `test` (node1..nodeN), MpiDefault=pmi2 (srun starts MPICH ranks), cred_expire=5 as
# in tests/slurm/cluster.sh.

node_cluster_pids=()
tb="${tb:?set tb to scripts/testbed first}"

skip() { echo "SKIP: $*" >&2; return 77; }
on_head() { "$tb" exec node1 "$@"; }

start_node_cluster() {
  local dir="$1" b i nodes=""
  for b in munged slurmctld slurmd sbatch scontrol scancel srun; do
    command -v "$b" > /dev/null || { skip "'$b' not found (Debian: apt-get install slurm-wlm munge)"; return; }
  done
  mkdir -p "$dir/munge" "$dir/state" "$dir/log"
  chmod 700 "$dir/munge"
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1 count=1024 status=none
  chmod 400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" ||
    { cat "$dir/log/munged.log" >&2; skip "munged does not start here"; return; }
  node_cluster_pids+=("$(cat "$dir/munge/munged.pid")")
  local cpus="${CLUSTER_CPUS:-4}" mem
  mem="$(awk -v n="$TESTBED_NODES" '/MemTotal/ {print int($2 / 1024 / n / 2)}' /proc/meminfo)"
  {
    cat << CONF
ClusterName=mtknodes
SlurmctldHost=node1(10.77.0.1)
SlurmctldPort=6817
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=5
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
MpiDefault=pmi2
ReturnToService=2
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=10
MinJobAge=600
CONF
    for ((i = 1; i <= TESTBED_NODES; i++)); do
      echo "NodeName=node$i NodeAddr=10.77.0.$i CPUs=$cpus Boards=1 SocketsPerBoard=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=$mem"
      nodes+="${nodes:+,}node$i"
    done
    echo "PartitionName=test Nodes=$nodes Default=YES MaxTime=INFINITE State=UP"
  } > "$dir/slurm.conf"
  export SLURM_CONF="$dir/slurm.conf"
  "$tb" exec node1 slurmctld -D -c -f "$SLURM_CONF" > "$dir/log/slurmctld.out" 2>&1 &
  node_cluster_pids+=("$!")
  for ((i = 1; i <= TESTBED_NODES; i++)); do
    mkdir -p "$dir/spool-node$i"
    "$tb" exec "node$i" slurmd -D -N "node$i" -f "$SLURM_CONF" > "$dir/log/slurmd-node$i.out" 2>&1 &
    node_cluster_pids+=("$!")
  done
  local end=$((SECONDS + ${CLUSTER_START_S:-60}))
  until [ "$(on_head sinfo -h -o %T -N 2> /dev/null | grep -cx idle)" = "$TESTBED_NODES" ]; do
    if ((SECONDS > end)); then
      for f in "$dir"/log/*; do echo "--- $f" >&2; tail -n 15 "$f" >&2; done
      skip "slurmctld/slurmd did not bring the nodes up"
      return
    fi
    sleep 0.3
  done
  echo "cluster: $nodes up (slurmctld on node1), SLURM_CONF=$SLURM_CONF"
}

stop_node_cluster() {
  local pid i
  if [ -n "${SLURM_CONF:-}" ]; then
    on_head scancel --quiet --partition=test --full 2> /dev/null || true
    for _ in $(seq 30); do [ -z "$(on_head squeue -h -p test 2> /dev/null)" ] && break; sleep 1; done
  fi
  for ((i = ${#node_cluster_pids[@]} - 1; i >= 0; i--)); do
    pid="${node_cluster_pids[$i]}"
    kill "$pid" 2> /dev/null || continue
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2> /dev/null || break; sleep 0.5; done
    kill -9 "$pid" 2> /dev/null || true
  done
  node_cluster_pids=()
}
