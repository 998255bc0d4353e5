# shellcheck shell=bash
# The fixed part of every script `trlstack slurm` writes, after the settings it renders: the nodes by role,
# the address every node reaches the server at, each node's check before anything starts, and how a stop
# proceeds. The roles' lines are rendered after it, then supervise.sh.
# Everything after the first empty line goes into the script as written, less the linter's directives
# (lines that hold nothing else), and with node-check.sh's lines in place of `# insert node-check.sh`
# (trlstack/commands/slurm/shell.py).
# shellcheck disable=SC2034 # ROLE, IFACE, SERVER_ADDR, MAIN_ADDR, SERVER_STOPPED: read by the parts after it

set -uo pipefail
log() { printf '%s trlstack: %s\n' "$(date +%T)" "$*"; }
fail() {
  log "error: $*"
  exit 1
}
declare -A ROLE ADDR IFACE

# Nodes by role, in the allocation's order: the first SERVE_NODES serve, the rest train.
mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
TRAINER_NODES=("${NODES[@]:$SERVE_NODES}")
SERVER_NODE=
[ "$SERVE_NODES" -eq 1 ] && SERVER_NODE=${NODES[0]}
REF_NODE=${SERVER_NODE:-${TRAINER_NODES[0]}}
log "job $SLURM_JOB_ID, attempt $((${SLURM_RESTART_COUNT:-0} + 1)):" \
  "server ${SERVER_NODE:-none}, trainers ${TRAINER_NODES[*]}"
mkdir -p "$RUN_DIR" "$CACHE_DIR" || fail "cannot create $RUN_DIR and $CACHE_DIR"

# The address every node reaches the server (or the first trainer) at: its name as the cluster resolves
# it, or the address of --network-interface on it when the fast network is not the one its name is on.
if [ -n "$NETWORK_INTERFACE" ]; then
  REF_ADDR=$(srun --nodes=1 --ntasks=1 --nodelist="$REF_NODE" --job-name="$CHECK_STEP" \
    ip -4 -o addr show dev "$NETWORK_INTERFACE" | awk '{sub("/.*", "", $4); print $4; exit}')
else
  REF_ADDR=$(getent ahostsv4 "$REF_NODE" | awk '{print $1; exit}')
fi
case "$REF_ADDR" in
  "") fail "no IPv4 address for $REF_NODE${NETWORK_INTERFACE:+ on $NETWORK_INTERFACE}" ;;
  127.* | 0.*) fail "$REF_NODE resolves to $REF_ADDR (loopback or the any-address), which other nodes" \
    "cannot reach; pass --network-interface IFACE to trlstack slurm" ;;
esac

# Every node, before any role starts: its address and interface on the route to REF_ADDR, its role's ports
# free, /dev/shm rid of segments a crashed run left, and the output folder the one the batch host sees.
read -r -d '' NODE_CHECK <<'CHECK'
# insert node-check.sh
CHECK
TOKEN="$OUTPUT_DIR/.trlstack-job-$SLURM_JOB_ID"
date >"$TOKEN" || fail "cannot write $TOKEN"
export REF_ADDR NETWORK_INTERFACE SERVER_NODE SERVER_PORTS TRAINER_PORTS OUTPUT_DIR TOKEN
NODE_INFO=$(srun --nodes="${#NODES[@]}" --ntasks-per-node=1 --job-name="$CHECK_STEP" --kill-on-bad-exit=1 \
  --export=ALL bash -c "$NODE_CHECK") ||
  fail "a node failed its check (its message is above); no role was started"
rm -f "$TOKEN"
while read -r node addr iface; do
  ADDR[$node]=$addr
  IFACE[$node]=$iface
  log "$node: $addr on $iface"
done <<<"$NODE_INFO"
SERVER_ADDR=${SERVER_NODE:+${ADDR[$SERVER_NODE]}}
MAIN_ADDR=${ADDR[${TRAINER_NODES[0]}]}

# Stopping. USR1 (the time limit ahead, or `scancel --signal=USR1 --batch JOB`) stops the trainers first:
# SIGTERM goes to every process of their steps on every node (scancel JOB.STEP), train's launchers ignore
# it, and every training process finishes the step in progress (the server still answers), then all of them
# save checkpoint-N together and exit. The server is stopped once they have, then the job is requeued.
# SIGTERM to this script means Slurm itself is ending the job (scancel, preemption, the time limit): every
# step got it at once; the trainers save the same way where the step in progress needs no more generation.
STOPPING=
SERVER_STOPPED=
stop_steps() { # stop_steps NAME: SIGTERM to every process of this job's steps called NAME, on every node
  local steps
  steps=$(squeue --noheader --steps --jobs "$SLURM_JOB_ID" --format='%i %j' |
    awk -v name="$1" '$2 == name {print $1}')
  # shellcheck disable=SC2086 # one step id a word: scancel takes each as an argument of its own
  [ -z "$steps" ] || scancel --signal=TERM $steps
}
on_usr1() {
  [ -n "$STOPPING" ] && return
  STOPPING=requeue
  log "stop requested: SIGTERM to the trainers (every process saves a checkpoint at the step reached)," \
    "then to the server; then the job is requeued"
  stop_steps "$TRAINER_STEP"
}
on_term() {
  STOPPING=${STOPPING:-end}
  log "Slurm is ending the job: every role got SIGTERM too and stops (trainers save a checkpoint)"
}
trap on_usr1 USR1
trap on_term TERM
