"""trlstack.commands.doctor.command: the findings printed, the exit code, the facts gathered on this machine,
and the command as a user runs it."""

from __future__ import annotations

from trlstack import __version__
from trlstack.cli import main
from trlstack.commands.doctor import command
from trlstack.commands.doctor.judge import Finding
from trlstack.gpus import Gpu


def gpu(index=0, capability=(9, 0), driver="580.95.05", name="NVIDIA H200"):
    return Gpu(index, f"GPU-{index:04d}", name, capability, driver)


def test_render_shows_fixes_for_problems_only():
    text = command.render(
        [Finding("ok", "shm", "fine", "never shown"), Finding("warn", "ports", "busy", "free it")]
    )
    assert text.splitlines() == [
        f"trlstack doctor {__version__}",
        "ok    shm    fine",
        "warn  ports  busy",
        "             fix: free it",
        "1 problem found",
    ]


def test_exit_code_is_0_unless_strict_and_something_is_wrong():
    ok, info, warn = Finding("ok", "a", "b"), Finding("info", "a", "b"), Finding("warn", "a", "b")
    assert command.exit_code([warn], strict=False) == 0
    assert command.exit_code([ok, info], strict=True) == 0
    assert command.exit_code([ok, warn], strict=True) == 1


def test_gather_facts_reads_this_machine(machine, tmp_path):
    machine([], source=None, problem="no driver")
    environ = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": "0"}
    facts = command.gather_facts((8000, 51216), environ)
    assert facts.probe.problem == "no driver" and facts.cuda_visible_devices == "0"
    assert (
        facts.hf_cache == str(tmp_path / "hf" / "hub")
        and not facts.hf_cache_exists
        and facts.hf_cache_writable
    )
    assert facts.hf_cache_free_bytes > 0 and facts.hf_offline == "1"
    assert set(facts.ports) == {8000, 51216}
    assert facts.pins["vllm"] == "0.25.0" and set(facts.installed) == set(facts.pins)


def test_doctor_on_a_machine_without_gpus_says_so_and_exits_0(machine, capsys, monkeypatch):
    monkeypatch.delenv("TRLSTACK_VLLM_PORT", raising=False)
    machine([], source=None, problem="NVML: NVML Shared Library Not Found")
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "warn  driver  no NVIDIA driver here" in out and "no GPU to check" in out
    assert "/dev/shm" in out and "port 8000" in out and "Hugging Face cache" in out
    assert main(["doctor", "--strict"]) == 1


def test_doctor_on_a_gpu_machine(machine, capsys, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    machine([gpu(0), gpu(1)])
    main(["doctor", "--port", "18000", "--group-port", "18001"])
    out = capsys.readouterr().out
    assert "ok    driver  NVIDIA driver 580.95.05 supports CUDA 13" in out
    assert "GPU 1: NVIDIA H200, compute capability 9.0: train uses bf16" in out
    assert "vLLM serves on 0, training on 1" in out and "port 18001" in out
