# shellcheck shell=bash
# The last part of every script `trlstack slurm` writes, after the lines that start the roles (each one's pid
# in ROLE): it waits for them and ends the job as they end, stopping the server once the trainers are done.
# Everything after the first empty line goes into the script as written, less the linter's directives
# (lines that hold nothing else; trlstack/commands/slurm/shell.py).

# Supervision: the job succeeds when every trainer has finished, and ends as soon as a role fails, naming
# its node and exit code; Slurm then stops what is left of the job on every node.
trainers_left=${#TRAINER_NODES[@]}
# shellcheck disable=SC2153 # ROLE (pid -> role) is filled by the lines that start the roles
while [ "${#ROLE[@]}" -gt 0 ]; do
  wait -n # returns when a role ends or a signal arrives; the statuses are read below
  for pid in "${!ROLE[@]}"; do
    kill -0 "$pid" 2>/dev/null && continue
    wait "$pid"
    code=$?
    role=${ROLE[$pid]}
    unset "ROLE[$pid]"
    [[ $role == trainer* ]] && trainers_left=$((trainers_left - 1))
    if [ -n "$STOPPING" ]; then
      log "$role stopped (exit $code)"
    elif [[ $role == trainer* ]] && [ "$code" -eq 0 ]; then
      log "$role finished"
    else
      log "error: $role exited with $code; ending the job (its output above, prefixed with its name," \
        "says why)"
      scancel --signal=TERM "$SLURM_JOB_ID"
      exit $((code == 0 ? 1 : code))
    fi
  done
  if [ "$trainers_left" -eq 0 ] && [ -z "$SERVER_STOPPED" ]; then
    SERVER_STOPPED=1
    STOPPING=${STOPPING:-done}
    if [ "${#ROLE[@]}" -gt 0 ]; then
      log "the trainers have ended; stopping the vLLM server"
      stop_steps "$SERVER_STEP"
    fi
  fi
done
case "$STOPPING" in
  done) log "done: checkpoints and the final model are in $RUN_DIR" ;;
  requeue)
    log "every role has stopped; requeueing: the next attempt resumes from the newest complete checkpoint" \
      "in $RUN_DIR"
    scontrol requeue "$SLURM_JOB_ID" || fail "scontrol requeue failed; submit this script again to resume"
    sleep 300 # Slurm ends this attempt now
    ;;
  *) exit 143 ;;
esac
