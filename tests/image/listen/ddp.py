"""A stand-in for the TRL script under `accelerate launch`: joins the process group the launcher set up (gloo:
no GPU here), and rank 0 prints every listening socket of this container as JSON lines."""

import json
import os
import sys
from dataclasses import asdict

import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from listening import listening  # noqa: E402

dist.init_process_group("gloo")
if dist.get_rank() == 0:
    master = {"MASTER_ADDR": os.environ["MASTER_ADDR"], "MASTER_PORT": os.environ["MASTER_PORT"]}
    print(json.dumps({"master": master}), flush=True)
    for listener in listening():
        if listener.pid is not None:
            print(json.dumps({"listener": asdict(listener)}), flush=True)
dist.barrier()
dist.destroy_process_group()
