"""prepare.sh: every node checked before any role starts, the addresses each role gets (the script run with
the stand-ins)."""

from __future__ import annotations

import json

import pytest

from .harness import Run, script


def test_a_busy_port_stops_the_job_before_any_role_starts(tmp_path):
    run = Run(tmp_path, script(), 2, STUB_BUSY=json.dumps({"gpu-b": ["29500"]}))
    done = run()
    assert done.returncode == 1
    assert (
        'gpu-b: port 29500 is in use (users:(("python3",pid=99,fd=3))), maybe by a crashed run' in done.stderr
    )
    assert "a node failed its check" in done.stdout
    assert run.calls("roles") == []


@pytest.mark.parametrize("address", ["127.0.1.1", "0.0.0.0"])
def test_a_name_that_resolves_to_loopback_or_the_any_address_asks_for_the_interface(tmp_path, address):
    run = Run(tmp_path, script(), 2, STUB_RESOLVE=address)
    done = run()
    assert done.returncode == 1
    assert f"gpu-a resolves to {address} (loopback or the any-address)" in done.stdout
    assert "pass --network-interface IFACE" in done.stdout
    assert run.calls("roles") == []


def test_the_interface_named_gives_every_address(tmp_path):
    run = Run(tmp_path, script(network_interface="ib0"), 2)
    assert run().returncode == 0
    server, trainer = run.roles()["gpu-a"], run.roles()["gpu-b"]
    assert server["argv"][server["argv"].index("--host") + 1] == "10.0.0.1"
    assert trainer["argv"][trainer["argv"].index("--main-process-ip") + 1] == "10.0.0.2"
    assert trainer["env"]["NCCL_SOCKET_IFNAME"] == "ib0"


def test_leftover_shared_memory_of_crashed_runs_is_removed_and_live_segments_kept(tmp_path):
    import mmap

    run = Run(tmp_path, script(), 2)
    stale = [run.shm / "nccl-abc123", run.shm / "psm_1f2e"]
    for path in [*stale, run.shm / "psm_live", run.shm / "dataset.bin"]:
        path.write_bytes(b"x" * 4096)
    with (run.shm / "psm_live").open("r+b") as handle, mmap.mmap(handle.fileno(), 4096):  # mapped: in use
        done = run()
    assert done.returncode == 0
    assert not any(path.exists() for path in stale)
    assert (run.shm / "psm_live").exists() and (run.shm / "dataset.bin").exists()
    assert "gpu-a: removed 2 segment(s) a crashed run left" in done.stderr


def test_an_output_folder_other_nodes_cannot_see_stops_the_job(tmp_path):
    run = Run(tmp_path, script(), 2)
    # The stand-in token is never visible: the check looks for it under another name.
    unseen = run.text.replace('-f "$TOKEN"', '-f "$TOKEN.elsewhere"')
    run.script.write_text(unseen.replace("for _ in 1 2 3 4 5 6 7 8 9 10; do", "for _ in 1; do"))
    done = run()
    assert done.returncode == 1
    assert "is not shared; choose --output-dir on storage every node mounts" in done.stderr
    assert run.calls("roles") == []
