"""Read by Python at start-up in every process of the CUDA-IPC server that test_ipc.py's stuck-push test
starts (this folder comes first on PYTHONPATH): from weight load TRLSTACK_GPU_TEST_HELD_LOAD on, vLLM's IPC
engine never returns from loading the handles it was sent, as a server wedged on the GPU would (an
out-of-memory retry, a lost worker), so the trainer waits in its HTTP /update_weights. Every other process,
and every process without the variable, is left as it is."""

import os
import sys
import threading
import time

HELD_LOAD = os.environ.get("TRLSTACK_GPU_TEST_HELD_LOAD")
ENGINE = "vllm.distributed.weight_transfer.ipc_engine"


def hold_loads() -> None:
    # vLLM imports the engine in its worker (trlstack's plugin first); its class is wrapped once it is there.
    while (engine := getattr(sys.modules.get(ENGINE), "IPCWeightTransferEngine", None)) is None:
        time.sleep(0.01)
    receive = engine.receive_weights
    calls = []

    def held(self, update_info):
        calls.append(1)
        if len(calls) >= int(HELD_LOAD):
            print(f"test: the server holds weight load {len(calls)}", file=sys.stderr, flush=True)
            while True:
                time.sleep(3600)
        return receive(self, update_info)

    engine.receive_weights = held


if HELD_LOAD is not None:
    threading.Thread(target=hold_loads, name="held-load", daemon=True).start()
