"""The isolated layout on a real engine: each role's only interface is the private network's eth0, which NCCL
is told to use, at the address the other role is given."""

from __future__ import annotations

import json

import pytest
from stacks import COMPOSE_FILE, SMOKE_FILE

pytestmark = pytest.mark.docker

# The container's interfaces and the IPv4 address of NCCL's interface (SIOCGIFADDR).
PROBE = """
import fcntl, json, os, socket, struct
name = os.environ["NCCL_SOCKET_IFNAME"]
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
packed = fcntl.ioctl(sock.fileno(), 0x8915, struct.pack("256s", name.encode()))
print(json.dumps({
    "interfaces": sorted(n for _, n in socket.if_nameindex()),
    "address": socket.inet_ntoa(packed[20:24]),
    "env": {k: os.environ.get(k) for k in ("TRLSTACK_VLLM_HOST", "VLLM_HOST_IP")},
}))
"""


def probe(compose, service: str) -> dict:
    done = compose.run("run", "--rm", "--no-deps", service, "python", "-c", PROBE, timeout=300)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_roles_meet_on_the_private_network(project, trlstack_image, tmp_path):
    compose = project(
        files=(COMPOSE_FILE, SMOKE_FILE),
        TRLSTACK_IMAGE=trlstack_image,
        TRLSTACK_OUTPUTS=str(tmp_path),
        TRLSTACK_VARIANT="isolated",
    )
    server, trainer = probe(compose, "vllm"), probe(compose, "grpo")
    assert server["interfaces"] == trainer["interfaces"] == ["eth0", "lo"]
    assert server["address"] == server["env"]["TRLSTACK_VLLM_HOST"]  # vLLM binds where the trainer looks
    assert trainer["address"] == trainer["env"]["VLLM_HOST_IP"]  # the rendezvous vLLM's workers reach
    assert server["address"] != trainer["address"]
