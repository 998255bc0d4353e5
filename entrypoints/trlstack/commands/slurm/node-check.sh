# shellcheck shell=bash
# Each node's check before any role starts, run on every node at once (prepare.sh: srun ... bash -c): its
# address and interface on the route to REF_ADDR, its role's ports free, /dev/shm rid of segments a crashed
# run left, and the output folder the one the batch host sees (TOKEN, written there). It prints
# `NODE ADDR IFACE`; prepare.sh exports what it reads (REF_ADDR, NETWORK_INTERFACE, SERVER_NODE,
# SERVER_PORTS, TRAINER_PORTS, OUTPUT_DIR, TOKEN).
# Everything after the first empty line goes into prepare.sh's NODE_CHECK as written, less the linter's
# directives (lines that hold nothing else; trlstack/commands/slurm/shell.py).

node=$SLURMD_NODENAME
say() { echo "trlstack: $node: $*" >&2; }
if [ -n "$NETWORK_INTERFACE" ]; then
  iface=$NETWORK_INTERFACE
  addr=$(ip -4 -o addr show dev "$iface" 2>/dev/null | awk '{sub("/.*", "", $4); print $4; exit}')
else
  route=$(ip -4 route get "$REF_ADDR" 2>/dev/null | head -n 1)
  iface=$(sed -n 's/.* dev \([^ ]*\).*/\1/p' <<<"$route")
  addr=$(sed -n 's/.* src \([^ ]*\).*/\1/p' <<<"$route")
  if [ "$iface" = lo ]; then # on REF_NODE itself: its own address, on the interface that carries it
    addr=$REF_ADDR
    iface=$(ip -4 -o addr show | awk -v a="$REF_ADDR" '{split($4, p, "/")} p[1] == a {print $2; exit}')
  fi
fi
if [ -z "$addr" ] || [ -z "$iface" ]; then
  say "no route to $REF_ADDR${NETWORK_INTERFACE:+ on $NETWORK_INTERFACE} (ip -4 route get)"
  exit 1
fi
ports=$TRAINER_PORTS
[ "$node" = "$SERVER_NODE" ] && ports=$SERVER_PORTS
for port in $ports; do
  if command -v ss >/dev/null && [ -n "$(ss -Hltn "sport = :$port")" ]; then
    owner=$(ss -Hltnp "sport = :$port" | awk '{print $NF; exit}')
    say "port $port is in use ($owner), maybe by a crashed run; stop it or choose another port"
    exit 1
  fi
done
in_use=$(cat /proc/[0-9]*/maps 2>/dev/null | grep -o '/dev/shm/.*' | sort -u)
removed=0
for file in /dev/shm/nccl-* /dev/shm/psm_* /dev/shm/torch_* /dev/shm/sem.mp-*; do
  if [ -f "$file" ] && [ -O "$file" ] && ! grep -qxF "$file" <<<"$in_use"; then
    rm -f -- "$file" && removed=$((removed + 1))
  fi
done
[ "$removed" -eq 0 ] || say "removed $removed segment(s) a crashed run left in /dev/shm"
for _ in 1 2 3 4 5 6 7 8 9 10; do
  [ -f "$TOKEN" ] && break
  sleep 1
done
if [ ! -f "$TOKEN" ]; then
  say "cannot see $TOKEN, written on the batch host: $OUTPUT_DIR is not shared; choose --output-dir" \
    "on storage every node mounts"
  exit 1
fi
echo "$node $addr $iface"
