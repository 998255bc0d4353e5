"""The trlstack command line as the CLI tests drive it: a machine of H200s and one call of main()."""

from __future__ import annotations

from trlstack.cli import main
from trlstack.gpus import Gpu

H200S = [Gpu(i, f"GPU-{i:04d}-h200", "NVIDIA H200", (9, 0), "580.95.05") for i in range(8)]
# Settings a developer's shell may hold that would change what `trlstack plan` prints.
PLAN_VARIABLES = (
    "TRLSTACK_VLLM_PORT",
    "TRLSTACK_VLLM_GROUP_PORT",
    "TRLSTACK_TENSOR_PARALLEL_SIZE",
    "TRLSTACK_GPU_MEMORY_UTILIZATION",
    "TRLSTACK_VARIANT",
)


def run(capsys, *argv):
    """main(argv): its exit code and what it printed."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_refused(capsys, monkeypatch, machine, found, argv, environ, words) -> None:
    """The catalogue's rule: on the machine `found` (None: no driver) with `environ`, `argv` exits 1 with a
    message naming every one of `words`, and prints nothing else."""
    if found is None:
        machine([], source=None, problem="NVML: NVML Shared Library Not Found; nvidia-smi is not on PATH")
    else:
        machine(found)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    code, out, err = run(capsys, *argv)
    assert code == 1
    assert out == ""
    assert err.startswith("trlstack: error: ")
    for word in words:
        assert word in err
