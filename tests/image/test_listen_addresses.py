"""What the trainer really listens on, measured in the image with what `train` passes and the processes it
starts (CPU stand-ins where the real one needs a GPU), and that the address train derives for a server on
another host is one that server reaches. compose/README's listen-address table states these results.

Measured under host networking, as compose's shared layout runs the roles: the sockets are the host's. The
test chooses free ports (as VLLM_GROUP_PORT and accelerate's --main_process_port would), so it never meets
another job's; the bind addresses do not depend on the port.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

TESTS = Path(__file__).resolve().parents[1]
MOUNT = ["-v", f"{TESTS}:/tests:ro", "-e", "PYTHONDONTWRITEBYTECODE=1", "-e", "HF_HUB_OFFLINE=1"]


def free_port() -> int:
    from trlstack.ports import free_port

    return free_port()


def lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def train_command(image: str, *argv: str) -> list[str]:
    """The command `train --print-command` prints in the image (env assignments first)."""
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", image, "train", *argv, "--print-command"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return shlex.split(done.stdout.splitlines()[0])


def launcher_at(argv: list[str]) -> int:
    """Where `PYTHON -m accelerate.commands.launch` starts in train's command."""
    return argv.index("accelerate.commands.launch") - 2


# Inside one container on the host's network: train's VLLM_HOST_IP and group port, the trainer's side of the
# rendezvous (rank 0) and a worker dialling it (rank 1), all at once.
WEIGHT_TRANSFER = """
set -e
python /tests/image/listen/rendezvous.py trainer {port} > /tmp/trainer.log &
until grep -q master_address /tmp/trainer.log; do sleep 0.2; done
address=$(python -c "import json; print(json.loads(open('/tmp/trainer.log').readline())['master_address'])")
python /tests/image/listen/rendezvous.py server "$address" {port}
wait
cat /tmp/trainer.log
"""


def test_the_weight_transfer_rendezvous_listens_only_on_vllm_host_ip(trlstack_image):
    port = free_port()
    argv = train_command(trlstack_image, "grpo", "--gpus", "2", "--group-port", str(port))
    env = dict(word.split("=", 1) for word in argv[: launcher_at(argv)])
    assert env["VLLM_HOST_IP"] == "127.0.0.1"  # a server on this machine, as in the shared layout
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", "host", *MOUNT, "-e", f"VLLM_HOST_IP={env['VLLM_HOST_IP']}"]
        + [trlstack_image, "bash", "-c", WEIGHT_TRANSFER.format(port=port)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = lines(done.stdout)
    assert {"met": f"127.0.0.1:{port}"} in found
    listeners = {(row["listener"]["address"], row["listener"]["port"]) for row in found if "listener" in row}
    print(f"\ntrainer rank 0 (weight-transfer rendezvous) listens on: {sorted(listeners)}")
    assert listeners == {("127.0.0.1", port)}


def test_a_multi_process_trainer_also_listens_on_every_interface_for_its_own_rendezvous(trlstack_image):
    # accelerate's launcher for 2+ processes (torchrun) runs torch.distributed's TCPStore, whose server takes
    # no bind address: MASTER_ADDR says where to dial, not where to listen.
    argv = train_command(trlstack_image, "grpo", "--gpus", "2")
    start = launcher_at(argv)
    launch = argv[start : argv.index("-m", start + 2)]  # up to the recipe runner's -m
    assert "--multi_gpu" in launch and "--main_process_port" not in launch  # train keeps torch's default
    port = free_port()
    launch += ["--main_process_port", str(port), "/tests/image/listen/ddp.py"]
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", "host", *MOUNT, trlstack_image, *launch],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = lines(done.stdout)
    assert {"master": {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}} in found
    listeners = [row["listener"] for row in found if "listener" in row]
    print(f"\naccelerate launch --multi_gpu listens on: {listeners}")
    store = [row for row in listeners if row["port"] == port]
    assert [row["address"] for row in store] == ["::"], listeners  # every interface, IPv4 and IPv6
    assert "-m accelerate.commands.launch" in store[0]["command"]


# Two containers on a private bridge network, as two hosts: the trainer derives its address toward the
# server and listens there; the server's side dials that address and the two meet.
TRAINER = """
set -e
line=$(train grpo --gpus 1 --print-command --vllm-url http://{server}:8000 --group-port {port} | head -1)
export $(echo "$line" | tr ' ' '\\n' | grep '^VLLM_HOST_IP=')
echo "{{\\"derived\\": \\"$VLLM_HOST_IP\\", \\"own\\": \\"$(hostname -i)\\"}}"
exec python /tests/image/listen/rendezvous.py trainer {port}
"""


def test_the_derived_address_is_one_a_server_on_another_host_reaches(trlstack_image):
    name = f"trlstack-test-{uuid.uuid4().hex[:8]}"
    subnet = f"172.31.{int(name[-2:], 16) % 200 + 20}.0/24"
    server, trainer, port = subnet.replace(".0/24", ".10"), subnet.replace(".0/24", ".20"), 51216
    subprocess.run(["docker", "network", "create", "--subnet", subnet, name], check=True, capture_output=True)
    try:
        started = subprocess.run(
            ["docker", "run", "-d", "--name", f"{name}-trainer", "--network", name, "--ip", trainer, *MOUNT]
            + [trlstack_image, "bash", "-c", TRAINER.format(server=server, port=port)],
            capture_output=True,
            text=True,
            check=True,
        )
        assert started.stdout.strip()
        met = subprocess.run(
            ["docker", "run", "--rm", "--network", name, "--ip", server, *MOUNT, trlstack_image]
            + ["bash", "-c", f"sleep 3; python /tests/image/listen/rendezvous.py server {trainer} {port}"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        logs = subprocess.run(["docker", "logs", f"{name}-trainer"], capture_output=True, text=True).stdout
        assert met.returncode == 0, met.stderr[-3000:] + logs[-3000:]
        found = lines(logs)
        assert {"derived": trainer, "own": trainer} in found, logs  # not 127.0.0.1: the route to the server
        listeners = {
            (row["listener"]["address"], row["listener"]["port"]) for row in found if "listener" in row
        }
        assert listeners == {(trainer, port)}
        assert lines(met.stdout) == [{"met": f"{trainer}:{port}"}]
    finally:
        subprocess.run(["docker", "rm", "-f", f"{name}-trainer"], capture_output=True)
        subprocess.run(["docker", "network", "rm", name], capture_output=True)


def test_loopback_for_a_server_on_another_host_is_refused_in_the_image(trlstack_image):
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "-e", "VLLM_HOST_IP=127.0.0.1", trlstack_image]
        + ["train", "grpo", "--gpus", "1", "--print-command", "--vllm-url", "http://10.9.8.7:8000"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert (
        "this machine's loopback, but the vLLM server at http://10.9.8.7:8000 is on 10.9.8.7" in done.stderr
    )


def test_the_server_binds_the_host_its_command_names(trlstack_image):
    # vLLM needs a GPU to start, so its bind is read from the command serve-vllm builds: uvicorn listens on
    # exactly --host:--port (tests/gpu/test_server_listens.py measures it on a GPU machine).
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", trlstack_image, "serve-vllm", "--gpus", "1"]
        + ["--print-command", "--port", "8123"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    argv = shlex.split(done.stdout)
    assert argv[argv.index("--host") + 1] == "127.0.0.1" and argv[argv.index("--port") + 1] == "8123"
