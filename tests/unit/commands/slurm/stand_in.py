#!/usr/bin/env python3
"""Stand-ins for Slurm and the nodes' network tools; each call is recorded in $STUB_DIR.

`harness.make_stubs` copies this file onto PATH once per command it stands in for (scontrol, getent, ip, ss,
squeue, scancel, srun, sbatch), with this Python in its first line; the name it is called by says which.
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

name, args = Path(sys.argv[0]).name, sys.argv[1:]
state = Path(os.environ["STUB_DIR"])
nodes = os.environ["STUB_NODES"].split()
addrs = dict(zip(nodes, os.environ["STUB_ADDRS"].split(), strict=False))
me = os.environ.get("STUB_NODE", "")


def record(kind, **fields):
    with (state / f"{kind}.jsonl").open("a") as out:
        out.write(json.dumps(fields) + "\n")


def steps():
    """The role steps whose process still runs."""
    path = state / "steps.jsonl"
    found = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    alive = []
    for step in found:
        try:
            os.kill(step["pid"], 0)
        except ProcessLookupError:
            continue
        alive.append(step)
    return alive


def srun():
    options = {}
    while args and args[0].startswith("-"):
        key, _, value = args.pop(0).partition("=")
        options[key] = value
    if args[:2] == ["bash", "-c"]:  # the node check, on every node
        for node in nodes:
            done = subprocess.run(args, env={**os.environ, "SLURMD_NODENAME": node, "STUB_NODE": node})
            if done.returncode:
                sys.exit(done.returncode)
    elif args[0] == "ip":
        sys.exit(subprocess.run(args, env={**os.environ, "STUB_NODE": options["--nodelist"]}).returncode)
    else:  # a role
        role(options)


def role(options):
    node = options["--nodelist"]
    server = "serve-vllm" in args
    waits = server or os.environ.get("STUB_TRAIN_UNTIL_TERM")

    def stop(*_):
        record("stopped", node=node, step=options["--job-name"])
        sys.exit(0 if server else 143)

    signal.signal(signal.SIGTERM, stop)
    record("steps", id=f"42.{os.getpid()}", name=options["--job-name"], pid=os.getpid())
    keep = (
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "VLLM_HOST_IP",
        "NCCL_SOCKET_IFNAME",
        "GLOO_SOCKET_IFNAME",
    )
    env = {key: os.environ[key] for key in keep if key in os.environ}
    record("roles", node=node, options=options, argv=args, env=env)
    code = json.loads(os.environ.get("STUB_EXIT", "{}")).get(node)
    time.sleep(0.3)
    if code is not None:
        print(f"{node}: exiting with {code}")
        sys.exit(code)
    while waits:
        time.sleep(0.05)


if name == "scontrol":
    if args[:2] == ["show", "hostnames"]:
        print("\n".join(nodes))
    else:
        record("scontrol", argv=args)
        if args[0] == "requeue":  # Slurm ends the attempt
            os.kill(os.getppid(), signal.SIGKILL)
elif name == "getent":
    print(f"{os.environ.get('STUB_RESOLVE') or addrs[args[1]]}  STREAM {args[1]}")
elif name == "ip":
    if "route" in args:
        target = args[-1]
        if target == addrs[me]:
            print(f"local {target} dev lo src {target} uid 0")
        else:
            print(f"{target} dev ib0 src {addrs[me]} uid 0")
    else:
        lines = {
            "lo": "1: lo    inet 127.0.0.1/8 scope host lo",
            "ib0": f"3: ib0    inet {addrs[me]}/16 brd 10.0.255.255 scope global ib0",
        }
        shown = [args[args.index("dev") + 1]] if "dev" in args else list(lines)
        print("\n".join(lines[name] for name in shown if name in lines))
elif name == "ss":
    port = args[-1].split(":")[-1]
    if port in json.loads(os.environ.get("STUB_BUSY", "{}")).get(me, []):
        print(f'LISTEN 0 128 0.0.0.0:{port} 0.0.0.0:* users:(("python3",pid=99,fd=3))')
elif name == "squeue":  # the job's steps still running: `JOB.STEP NAME`
    for step in steps():
        print(f"{step['id']} {step['name']}")
elif name == "scancel":  # `--signal=TERM JOB` signals every step, `--signal=TERM JOB.STEP ...` those steps
    record("scancel", argv=args)
    targets = [arg for arg in args if not arg.startswith("-")]
    for step in steps():
        if step["id"] in targets or step["id"].split(".")[0] in targets:
            with contextlib.suppress(ProcessLookupError):
                os.kill(step["pid"], signal.SIGTERM)
elif name == "srun":
    srun()
elif name == "sbatch":
    record("sbatch", argv=args)
    print("4242")
