#!/usr/bin/env bash
# Runs one rank of a torchrun/accelerate launch (`--no-python` / `--no_python` before this script) with an
# NCCL_HOSTID of its own, from the LOCAL_RANK the launcher sets: NCCL refuses two ranks of one communicator on
# one GPU of one host ("Duplicate GPU detected"), so ranks sharing a GPU name themselves as hosts of their own
# and NCCL moves their traffic over its sockets. accelerate cannot set a variable per rank; this wrapper does.
set -euo pipefail
export NCCL_HOSTID="${HOSTNAME:-$(hostname)}-trlstack-rank${LOCAL_RANK:?set by the launcher}"
exec "$@"
