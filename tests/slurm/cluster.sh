# shellcheck shell=bash
# Sourced by the Slurm tests: a one-node Slurm cluster owned by the test, run as root.
#   start_cluster DIR   munged with a generated key, slurmctld and slurmd from DIR/slurm.conf
#                       (this node's CPUs and memory from `slurmd -C`, free ports, state under DIR);
#                       exports SLURM_CONF for the client commands; returns 77 (skip) with a
#                       message when the daemons cannot start here
#     CLUSTER_CPUS=N    declares N CPUs (1 socket x N cores) instead of the real count, so that
#                       jobs of more tasks than this machine has cores can be placed
#     CLUSTER_GPUS=N    declares a GRES of N GPUs (gpu:N) over stand-in character devices
#                       DIR/dev/mtk-fake-gpu0..N-1 (mknod, major 195 like NVIDIA's; nothing
#                       behind them and no GPU needed: Slurm only hands their indices to the
#                       tasks, in CUDA_VISIBLE_DEVICES)
#   stop_cluster        cancels the cluster's jobs, waits for them, stops the daemons it started (by
#                       PID) and kills what is left of its jobs (processes with its SLURM_CONF)
# The cluster's partition is `test`; MpiDefault=pmi2, so `srun` starts MPICH ranks. A requeued job
# may start again cred_expire + 1 seconds after its requeue (Slurm's default 120, here 5: the least
# Slurm accepts; a step's launch credential must reach slurmd within it, seconds to spare here).

cluster_pids=()

skip() { echo "SKIP: $*" >&2; return 77; }

# free_ports N: N TCP ports nothing listens on (the kernel picks them).
free_ports() {
  /usr/bin/python3 - "$1" <<'PY'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

# wait_for SECONDS COMMAND...: retries COMMAND every 0.2 s until it succeeds or SECONDS have passed.
wait_for() {
  local end=$((SECONDS + $1))
  shift
  while :; do
    "$@" > /dev/null 2>&1 && return 0
    ((SECONDS < end)) || return 1
    sleep 0.2
  done
}

start_cluster() {
  local dir="$1" b
  [ "$(id -u)" -eq 0 ] || { skip "the Slurm test runs its own slurmctld/slurmd/munged and needs root"; return; }
  for b in munged slurmctld slurmd sbatch scontrol scancel srun python3; do
    command -v "$b" > /dev/null || { skip "'$b' not found (Debian: apt-get install slurm-wlm munge)"; return; }
  done
  mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
  chmod 700 "$dir/munge"
  # munged: a fresh key, its own socket; --force because it runs as root.
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1 count=1024 status=none
  chmod 400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" ||
    { cat "$dir/log/munged.log" >&2; skip "munged does not start here"; return; }
  cluster_pids+=("$(cat "$dir/munge/munged.pid")")

  local host node ctld_port slurmd_port
  host="$(hostname -s)"
  # `slurmd -C` prints this node's line in slurm.conf syntax (CPUs, sockets, cores, memory).
  node="$(slurmd -C | head -1)"
  [[ "$node" == NodeName=* ]] || { skip "slurmd -C printed '$node'"; return; }
  node="${node/NodeName=* CPUs/NodeName=$host NodeAddr=127.0.0.1 CPUs}"
  local extra=""
  if [ -n "${CLUSTER_CPUS:-}" ]; then
    # slurmd keeps the declared CPUs instead of refusing the node (config_overrides)
    node="$(sed -E "s/CPUs=[0-9]+ Boards=[0-9]+ SocketsPerBoard=[0-9]+ CoresPerSocket=[0-9]+ ThreadsPerCore=[0-9]+/CPUs=$CLUSTER_CPUS Boards=1 SocketsPerBoard=1 CoresPerSocket=$CLUSTER_CPUS ThreadsPerCore=1/" <<< "$node")"
    extra+="SlurmdParameters=config_overrides"$'\n'
  fi
  if [ -n "${CLUSTER_GPUS:-}" ]; then
    mkdir -p "$dir/dev"
    # slurmd wants character devices: NVIDIA's major number (195), nothing behind them
    for ((i = 0; i < CLUSTER_GPUS; i++)); do
      mknod "$dir/dev/mtk-fake-gpu$i" c 195 "$i" ||
        { skip "cannot make stand-in GPU device files (mknod) under $dir"; return; }
    done
    echo "Name=gpu File=$dir/dev/mtk-fake-gpu[0-$((CLUSTER_GPUS - 1))]" > "$dir/gres.conf"
    node+=" Gres=gpu:$CLUSTER_GPUS"
    extra+="GresTypes=gpu"$'\n'
  fi
  read -r ctld_port slurmd_port <<< "$(free_ports 2)"
  cat > "$dir/slurm.conf" <<CONF
ClusterName=mtktest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=5
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmi2
ReturnToService=2
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=10
MinJobAge=600
$extra$node
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -D -c -f "$SLURM_CONF" > "$dir/log/slurmctld.out" 2>&1 &
  cluster_pids+=("$!")
  slurmd -D -f "$SLURM_CONF" > "$dir/log/slurmd.out" 2>&1 &
  cluster_pids+=("$!")
  if ! wait_for 60 bash -c 'sinfo -h -o %T | grep -qx idle'; then
    tail -20 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" "$dir/log/"*.out >&2
    skip "slurmctld/slurmd did not bring the node up"
    return
  fi
  echo "cluster: node $host up (ports $ctld_port, $slurmd_port), SLURM_CONF=$SLURM_CONF"
}

# cluster_leftovers: processes that carry this cluster's SLURM_CONF (job steps, slurmstepd) and
# are not the test's own shell or its children.
cluster_leftovers() {
  local p pid q
  for p in /proc/[0-9]*; do
    pid="${p#/proc/}"
    tr '\0' '\n' 2> /dev/null < "$p/environ" | grep -qxF "SLURM_CONF=$SLURM_CONF" || continue
    q="$pid"
    while [ -n "$q" ] && [ "$q" -gt 1 ] && [ "$q" != "$$" ]; do q="$(ps -o ppid= -p "$q" | tr -d " " || true)"; done
    [ "$q" = "$$" ] || echo "$pid"
  done
}

stop_cluster() {
  local pid
  if [ -n "${SLURM_CONF:-}" ]; then
    scancel --quiet --partition=test --full 2> /dev/null || true
    # let the cancelled steps end before slurmd goes, or they outlive it
    for _ in $(seq 30); do [ -z "$(squeue -h -p test 2> /dev/null)" ] && break; sleep 1; done
  fi
  for ((i = ${#cluster_pids[@]} - 1; i >= 0; i--)); do
    pid="${cluster_pids[$i]}"
    kill "$pid" 2> /dev/null || continue
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2> /dev/null || break; sleep 0.5; done
    kill -9 "$pid" 2> /dev/null || true
  done
  cluster_pids=()
  # a failed test must not leave ranks running that slow every test after it
  if [ -n "${SLURM_CONF:-}" ]; then
    for pid in $(cluster_leftovers); do kill -9 "$pid" 2> /dev/null || true; done
  fi
}
