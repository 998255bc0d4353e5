"""What the rank tests share: vLLM's dev-mode weight-update endpoints, served on loopback."""

from __future__ import annotations

import http.server
import json
import threading

import pytest


class Endpoints(http.server.BaseHTTPRequestHandler):
    """vLLM's dev-mode endpoints as the IPC push calls them; each request recorded."""

    backend = "trlstack-ipc"
    failing = ""
    seen: list = []

    def do_GET(self):  # noqa: N802 - http.server's name
        assert self.path == "/server_info?config_format=json"
        self.answer(200, {"vllm_config": {"weight_transfer_config": {"backend": self.backend}}})

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append((self.path, body))
        if self.path == self.failing:
            self.answer(500, {"error": "CUDA out of memory"})
        else:
            self.answer(200, {"message": "ok"})

    def answer(self, status, document):
        data = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def endpoints():
    Endpoints.seen, Endpoints.backend, Endpoints.failing = [], "trlstack-ipc", ""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Endpoints)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", Endpoints
    server.shutdown()
