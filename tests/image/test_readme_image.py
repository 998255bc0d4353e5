"""The README commands that need the image, run against the test image (tests/readme_commands.py, InImage):
the roles in their dry mode, so that an example the product refuses fails here, not on a user's GPU
machine."""

from __future__ import annotations

import json
import shlex
import subprocess
import uuid
from pathlib import Path

import pytest
from readme_commands import EXERCISED, IMAGE_TAG, InImage, shown

pytestmark = pytest.mark.docker

IN_IMAGE = sorted({c.key: c for c in shown() if isinstance(EXERCISED.get(c.key), InImage)}.items())
TAGS = ("trlstack:latest", IMAGE_TAG)


def for_the_test(argv: list[str], image: str, volume_prefix: str, cwd: Path) -> tuple[list[str], list[str]]:
    """The README's docker command on this machine: the test image, no GPU request, the README's named volumes
    under names of the test's own (returned, to remove), `$PWD` the test's folder."""
    out: list[str] = []
    volumes: list[str] = []
    words = iter(argv)
    for word in words:
        if word == "--gpus":
            next(words)  # no GPU on the machines the image tests run on
            continue
        if word == "-v":
            source, _, target = next(words).replace("$PWD", str(cwd)).partition(":")
            if "/" not in source:
                source = f"{volume_prefix}{source}"
                volumes.append(source)
            out += ["-v", f"{source}:{target}"]
            continue
        out.append(image if word in TAGS else word)
    return out, volumes


@pytest.mark.parametrize(("key", "command"), IN_IMAGE, ids=[key for key, _ in IN_IMAGE])
def test_a_readme_command_runs_against_the_image(key, command, trlstack_image, tmp_path):
    how = EXERCISED[key]
    assert isinstance(how, InImage)
    (tmp_path / "outputs").mkdir(mode=0o777)
    (tmp_path / "outputs").chmod(0o777)  # the image's user, uid 1000, writes there
    argv, volumes = for_the_test(
        shlex.split(command.text), trlstack_image, f"trlstack-readme-{uuid.uuid4().hex[:8]}-", tmp_path
    )
    argv += shlex.split(how.role_append)
    try:
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    finally:
        if volumes:
            subprocess.run(["docker", "volume", "rm", "-f", *volumes], capture_output=True)
    assert done.returncode == 0, (
        f"{command}\nran {shlex.join(argv)}: exit {done.returncode}\n{done.stderr[-3000:]}"
    )


# Runs the command (argv in sys.argv[1]) with a responder answering 200, then 500, at /health on
# 127.0.0.1:8000, vLLM's default port; prints the two exit codes.
STAND_IN = """
import http.server, json, subprocess, sys, threading
check = json.loads(sys.argv[1])
codes = []
for status in (200, 500):
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(status if self.path == "/health" else 404)
            self.end_headers()
    server = http.server.HTTPServer(("127.0.0.1", 8000), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    codes.append(subprocess.run(check, capture_output=True).returncode)
    server.shutdown()
    server.server_close()
print(json.dumps(codes))
"""


def test_the_health_command_shown_passes_only_on_200(trlstack_image):
    (check,) = [c for c in shown() if c.path == "docker/README.md" and "/health" in c.text]
    argv = ["docker", "run", "--rm", "--network", "none", trlstack_image, "python", "-c", STAND_IN]
    done = subprocess.run(
        [*argv, json.dumps(shlex.split(check.text))], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [0, 1]
