"""supervise.sh, and the stop it shares with prepare.sh: how the job ends (the script run with the
stand-ins)."""

from __future__ import annotations

import json
import signal
import time

from .harness import Run, script


def test_a_failed_role_ends_the_job_naming_it_its_node_and_exit_code(tmp_path):
    run = Run(tmp_path, script(nodes=3), 3, STUB_EXIT=json.dumps({"gpu-c": 3}))
    done = run()
    assert done.returncode == 3
    assert "error: trainer (machine rank 1) on gpu-c exited with 3; ending the job" in done.stdout
    assert "[trainer 1 gpu-c] gpu-c: exiting with 3" in done.stdout
    assert run.calls("scancel") == [{"argv": ["--signal=TERM", "42"]}]


def test_a_server_that_ends_while_trainers_run_fails_the_job(tmp_path):
    run = Run(tmp_path, script(), 2, STUB_EXIT=json.dumps({"gpu-a": 0}), STUB_TRAIN_UNTIL_TERM="1")
    done = run()
    assert done.returncode == 1
    assert "error: vLLM server on gpu-a exited with 0; ending the job" in done.stdout


def test_usr1_stops_the_trainers_then_the_server_then_requeues(tmp_path):
    run = Run(tmp_path, script(nodes=3), 3, STUB_TRAIN_UNTIL_TERM="1")
    job = run.start()
    deadline = time.monotonic() + 30
    while len(run.calls("roles")) < 3:
        assert time.monotonic() < deadline and job.poll() is None
        time.sleep(0.05)
    job.send_signal(signal.SIGUSR1)
    output, _ = job.communicate(timeout=30)
    assert job.returncode == -signal.SIGKILL  # ended by Slurm's requeue
    assert "stop requested: SIGTERM to the trainers (every process saves a checkpoint at the step" in output
    assert "trainer (machine rank 0) on gpu-b stopped (exit 143)" in output
    # Every process of both trainer steps first, while the server still answers; the server once they ended.
    trainers = sorted(run.step_ids("train"))
    assert [sorted(call["argv"][1:]) for call in run.calls("scancel")] == [
        trainers,
        run.step_ids("serve-vllm"),
    ]
    stopped = [call["step"] for call in run.calls("stopped")]
    assert stopped == ["train", "train", "serve-vllm"]
    assert run.calls("scontrol") == [{"argv": ["requeue", "42"]}]
