"""Read by Python at start-up in every process of test_train_fsdp.py's stuck-push test (this folder comes
first on PYTHONPATH): the training rank TRLSTACK_GPU_TEST_HELD_RANK keeps out of the weight push from push
number TRLSTACK_GPU_TEST_HELD_PUSH on, as a rank held up elsewhere would be (a slow data loader, a hung file
system), so the other rank waits in that push's real NCCL all-gather. Every other process is left as it is."""

import os
import sys
import threading
import time

HELD_RANK = os.environ.get("TRLSTACK_GPU_TEST_HELD_RANK")
HELD_PUSH = int(os.environ.get("TRLSTACK_GPU_TEST_HELD_PUSH", "2"))


def hold_pushes() -> None:
    # TRL is imported later, by the recipe; its class is wrapped once its module has run.
    while (
        generation := getattr(sys.modules.get("trl.generation.vllm_generation"), "VLLMGeneration", None)
    ) is None:
        time.sleep(0.01)
    push = generation.sync_weights
    calls = []

    def held(self, *args, **kwargs):
        calls.append(1)
        if len(calls) >= HELD_PUSH:
            print(
                f"test: rank {HELD_RANK} keeps out of weight push {len(calls)}", file=sys.stderr, flush=True
            )
            while True:
                time.sleep(3600)
        return push(self, *args, **kwargs)

    generation.sync_weights = held


if HELD_RANK is not None and os.environ.get("RANK") == HELD_RANK:
    threading.Thread(target=hold_pushes, name="held-rank", daemon=True).start()
