#!/bin/bash
# The daemons of one machine of the test cluster, started in order; the container ends when one of them does.
#   cluster-entrypoint controller   munge, MariaDB, slurmdbd, slurmctld; makes the cluster's munge key
#   cluster-entrypoint node         munge, slurmd
# /cluster/munge (a volume on every machine) carries the munge key; /shared (a volume on every machine) is the
# cluster filesystem, writable by the image's user.
set -euo pipefail
role=${1:?usage: cluster-entrypoint controller|node}
shared_key=/cluster/munge/munge.key

log() { echo "cluster-entrypoint ($role): $*" >&2; }

wait_for() {  # wait_for SECONDS WHAT COMMAND...
  local seconds=$1 what=$2
  shift 2
  for _ in $(seq "$seconds"); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 1
  done
  log "no $what after $seconds s"
  exit 1
}

start_munge() {
  if [ "$role" = controller ] && [ ! -s "$shared_key" ]; then
    (umask 077 && dd if=/dev/urandom of="$shared_key.new" bs=1024 count=1 status=none && mv "$shared_key.new" "$shared_key")
  fi
  wait_for 60 "munge key in $shared_key" test -s "$shared_key"
  install -o munge -g munge -m 0400 "$shared_key" /etc/munge/munge.key
  install -d -o munge -g munge -m 0755 /run/munge
  runuser -u munge -- munged --foreground &
  wait_for 30 munged munge -n
}

# shellcheck disable=SC2329 # called as "start_$role" below
start_controller() {
  install -d -o trlstack -g trlstack /shared
  install -d -o mysql -g mysql /run/mysqld
  if [ ! -d /var/lib/mysql/mysql ]; then
    mariadb-install-db --user=mysql --skip-test-db >/dev/null
  fi
  runuser -u mysql -- mariadbd --skip-networking &
  wait_for 60 MariaDB mariadb -e 'select 1'
  # The database is made here: slurmdbd 24.11 creating it itself reuses a failed connection, which
  # MariaDB's client library 3.4 then refuses ("Number of columns in result ... exceeds ...").
  mariadb -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
              CREATE USER IF NOT EXISTS slurm@localhost IDENTIFIED VIA unix_socket;
              GRANT ALL ON slurm_acct_db.* TO slurm@localhost;"
  install -d -o slurm -g slurm /run/slurm
  runuser -u slurm -- slurmdbd -D &
  wait_for 60 slurmdbd sacctmgr --noheader list cluster
  sacctmgr --immediate add cluster trlstack >/dev/null 2>&1 || true
  runuser -u slurm -- slurmctld -D -i &
  wait_for 60 slurmctld scontrol ping
}

# shellcheck disable=SC2329 # called as "start_$role" below
start_node() {
  # Apptainer without root: squashfuse mounts the .sif through /dev/fuse, usable by every user as on a host.
  [ -c /dev/fuse ] && chmod 0666 /dev/fuse
  slurmd -D &
}

start_munge
"start_$role"
log "up"
wait -n
log "a daemon ended; stopping this machine"
exit 1
