"""Shared fixtures of the unit tests."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def no_exec(monkeypatch):
    """Fail the test if anything tries to replace this process or start another: bad input starts nothing."""
    import subprocess

    def refuse(*args, **kwargs):
        pytest.fail(f"exec or a child process was asked for with {args!r}")

    for name in ("execvpe", "execvp", "execve", "execv", "execl", "execlp"):
        monkeypatch.setattr(os, name, refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)


@pytest.fixture
def machine(monkeypatch):
    """Make GPU discovery report the given GPUs (the NVIDIA driver is the external boundary replaced here)."""
    from trlstack import gpus

    def install(found, source="nvml", problem=None):
        found = tuple(gpus.Gpu(i) if isinstance(i, int) else i for i in found)
        result = gpus.Probe(found, source, problem)
        monkeypatch.setattr(gpus, "probe", lambda: result)
        return result

    return install


@pytest.fixture
def clean_env(monkeypatch):
    """No trlstack, CUDA or Hugging Face setting leaks in from the machine running the tests."""
    for name in list(os.environ):
        if name.startswith(("TRLSTACK_", "VLLM_", "CUDA_", "HF_", "KERNELS_")):
            monkeypatch.delenv(name)
    return monkeypatch


@pytest.fixture
def run_dir(tmp_path, clean_env):
    """A clean environment whose working folder is the test's own (train writes outputs/ there)."""
    clean_env.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """Make the given Python packages findable (empty stand-ins where they are not installed; nothing imports
    them: exec is intercepted)."""
    import importlib.util

    def install(*names):
        site = tmp_path / "site-packages"
        for name in names:
            if importlib.util.find_spec(name) is None:
                (site / name).mkdir(parents=True, exist_ok=True)
                (site / name / "__init__.py").write_text("")
        monkeypatch.syspath_prepend(str(site))

    return install


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    """Put executables with the given names on PATH (nothing runs them: exec is intercepted)."""

    def install(*names):
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        for name in names:
            program = bin_dir / name
            program.write_text("#!/bin/sh\nexit 99\n")
            program.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")

    return install


@pytest.fixture
def exec_calls(monkeypatch):
    """Record the command a role hands over to instead of running it: os.execvpe (serve-vllm) or
    roles/train/stopping.run (train stays the parent of accelerate); the role returns as if that failed."""
    from trlstack.roles.train import stopping

    class Execd(BaseException):  # past run_main, which reports any Exception as a bug
        pass

    class Calls(list):
        pass

    calls = Calls()

    def record(file, args, env):
        calls.append((file, list(args), dict(env)))
        raise Execd

    def run(command, environ):
        record(command.argv[0], command.argv, {**environ, **command.env})

    monkeypatch.setattr(os, "execvpe", record)
    monkeypatch.setattr(stopping, "run", run)
    calls.Execd = Execd
    return calls


class VllmStandIn:
    """A local HTTP server answering like vLLM's /health and /server_info (vLLM itself runs on GPUs)."""

    def __init__(self):
        import http.server
        import json
        import threading

        self.health_failures = 0  # answer 503 this many times first, as vLLM does while loading
        self.server_info: tuple[int, bytes] = (
            200,
            json.dumps({"vllm_config": {"weight_transfer_config": {"backend": "nccl"}}}).encode(),
        )
        self.requests: list[str] = []
        stand_in = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's naming
                stand_in.requests.append(self.path)
                if self.path == "/health":
                    status, body = (503, b"") if stand_in.health_failures > 0 else (200, b"")
                    stand_in.health_failures -= 1
                elif self.path.startswith("/server_info"):
                    status, body = stand_in.server_info
                else:
                    status, body = 404, b'{"detail": "Not Found"}'
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def vllm_server():
    server = VllmStandIn()
    yield server
    server.close()


@pytest.fixture
def closed_port():
    """A local TCP port nothing listens on."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
