"""The server's health check, exactly as compose renders it, run in the image: healthy only while something
answers 200 at /health on the address and port serve-vllm binds. A small HTTP responder in the container
stands in for vLLM's /health endpoint (vLLM needs a GPU)."""

from __future__ import annotations

import json

import pytest
from stacks import COMPOSE_FILE, SMOKE_FILE

pytestmark = pytest.mark.docker

# Runs the health check (argv in sys.argv[1]) with nothing listening, then with a responder answering 200 and
# 500 at /health, on TRLSTACK_VLLM_HOST:TRLSTACK_VLLM_PORT; prints the three exit codes.
STAND_IN = """
import http.server, json, os, subprocess, sys, threading
check = json.loads(sys.argv[1])
address = (os.environ["TRLSTACK_VLLM_HOST"], int(os.environ["TRLSTACK_VLLM_PORT"]))
codes = [subprocess.run(check, capture_output=True).returncode]
for status in (200, 500):
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(status if self.path == "/health" else 404)
            self.end_headers()
    server = http.server.HTTPServer(address, Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    codes.append(subprocess.run(check, capture_output=True).returncode)
    server.shutdown()
    server.server_close()
print(json.dumps(codes))
"""


def test_health_check_passes_only_on_200_at_health(project, trlstack_image, tmp_path):
    compose = project(
        files=(COMPOSE_FILE, SMOKE_FILE),
        TRLSTACK_IMAGE=trlstack_image,
        TRLSTACK_OUTPUTS=str(tmp_path),
        TRLSTACK_VARIANT="isolated",  # its own network namespace: the port is free
    )
    test = compose.config("vllm")["services"]["vllm"]["healthcheck"]["test"]
    assert test[0] == "CMD"
    done = compose.run("run", "--rm", "--no-deps", "vllm", "python", "-c", STAND_IN, json.dumps(test[1:]))
    nothing, ok, failing = json.loads(done.stdout.strip().splitlines()[-1])
    assert nothing != 0 and ok == 0 and failing != 0, (nothing, ok, failing)
