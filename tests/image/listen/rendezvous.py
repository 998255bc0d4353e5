"""One side of TRL 1.16's weight-transfer rendezvous, opened as TRL's client and vLLM's workers open it,
without the NCCL communicator on top (that needs GPUs).

    python rendezvous.py trainer PORT           rank 0, listening at vLLM's get_ip() (VLLM_HOST_IP), as
                                                VLLMClient.init_communicator does; prints its address first
    python rendezvous.py server ADDRESS PORT    rank 1, dialling ADDRESS:PORT, as vLLM's workers do

Once both have met, the trainer prints its own listening sockets as JSON lines, then both leave together.
"""

import json
import os
import sys
from dataclasses import asdict

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from listening import listening  # noqa: E402 - tests/listening.py, mounted beside this folder
from vllm.distributed.utils import StatelessProcessGroup  # noqa: E402
from vllm.utils.network_utils import get_ip  # noqa: E402

if sys.argv[1] == "trainer":
    address, port = get_ip(), int(sys.argv[2])
    print(json.dumps({"master_address": address}), flush=True)
    group = StatelessProcessGroup.create(host=address, port=port, rank=0, world_size=2)
    group.barrier()
    for listener in listening():
        if listener.pid == os.getpid():
            print(json.dumps({"listener": asdict(listener)}), flush=True)
    group.barrier()
else:
    group = StatelessProcessGroup.create(host=sys.argv[2], port=int(sys.argv[3]), rank=1, world_size=2)
    group.barrier()
    group.barrier()
    print(json.dumps({"met": f"{sys.argv[2]}:{sys.argv[3]}"}), flush=True)
