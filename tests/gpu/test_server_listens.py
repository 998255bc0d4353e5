"""What serve-vllm really listens on, on a GPU machine: the HTTP API (with the dev-mode endpoints) on exactly
--host:--port, and every other socket of the server's processes reported, for compose/README.md's
listen-address table.
The trainer's side is measured in the image (tests/image/test_listen_addresses.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from gpu_env import free_port, missing, start_server, stop, wait_healthy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from listening import listening  # noqa: E402 - tests/listening.py

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(bool(missing()), reason=str(missing()))]


def session_of(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def test_the_server_listens_for_http_on_its_host_only(tiny, tmp_path):
    port = free_port()
    log = tmp_path / "server.log"
    server = start_server(tiny / "model", port, log, gpus="0")  # its own session: every worker is in it
    try:
        wait_healthy(f"http://127.0.0.1:{port}", server, log)
        mine = [row for row in listening() if row.pid is not None and session_of(row.pid) == server.pid]
    finally:
        stop(server)
    print("\nserve-vllm (1 GPU) listens on:")
    for row in sorted(mine, key=lambda row: (row.port != port, row.address, row.port)):
        print(f"  {row.address}:{row.port}  pid {row.pid}  {row.command[:100]}")
    http = [(row.address, row.port) for row in mine if row.port == port]
    assert http == [("127.0.0.1", port)], mine
