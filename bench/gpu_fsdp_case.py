"""One rank of one bench/gpu_fsdp.py case, started by torchrun: a Qwen2 decoder of the case's shape in float32
(TRL's default) with bf16 autocast and fused AdamW (transformers' default optimizer), under DDP or torch's
FSDP2 as `train --sharding fsdp2` runs it through accelerate (each layer, then the whole model; with bf16, the
gathered weights and the reduced gradients in bf16: accelerate's MixedPrecisionPolicy), STEPS steps on random
tokens; prints one JSON line per rank: its peak memory and its step times. Run only through
bench/gpu_fsdp.py."""

from __future__ import annotations

import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from transformers import Qwen2Config, Qwen2ForCausalLM


def say(row: dict) -> None:
    """The row as one write: the ranks share torchrun's stdout, and print's separate writes of a line and its
    newline can interleave across them."""
    os.write(sys.stdout.fileno(), (json.dumps(row) + "\n").encode())


def main(shape: str, sharding: str, steps: int, batch: int, length: int) -> None:
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank % torch.cuda.device_count())
    dist.init_process_group("nccl")
    config = Qwen2Config(**json.loads(shape), attn_implementation="sdpa")
    with torch.device("meta"):
        model = Qwen2ForCausalLM(config)
    if sharding == "fsdp2":
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
        for layer in model.model.layers:
            fully_shard(layer, reshard_after_forward=True, mp_policy=policy)
        fully_shard(model, reshard_after_forward=True, mp_policy=policy)
    model.to_empty(device="cuda")
    with torch.no_grad():  # random weights: the memory and the time are what is measured
        for parameter in model.parameters():
            parameter.normal_(0, 0.02)
    if sharding == "none":
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    times = []
    try:
        for _ in range(steps):
            ids = torch.randint(0, config.vocab_size, (batch, length), device="cuda")
            torch.cuda.synchronize()
            started = time.perf_counter()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - started)
    except torch.OutOfMemoryError:
        # What it held when it ran out is a floor under the peak it needed: the figure DDP is compared by
        # where it does not fit.
        held = torch.cuda.max_memory_allocated()
        row = {"rank": dist.get_rank(), "status": "oom", "peak_at_least_bytes": held, "step_s": times}
        say(row)
        os._exit(0)  # no collective after an OOM: the process group may be wedged
    peak = torch.cuda.max_memory_allocated()
    say({"rank": dist.get_rank(), "peak_bytes": peak, "step_s": times})
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
