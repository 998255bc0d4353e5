"""One weight-push case for bench/gpu_server_mode.py --ipc, in a process of its own: a saved model's weights
(bf16, on this process's GPU, as a trainer holds them) pushed into a running serve-vllm --pushes times, and
each push timed from the first byte handed over to the server's answer that it has loaded the last.

- `ipc-packed` / `ipc-unpacked`: trlstack's CUDA-IPC push (rank/ipc_push.py: vLLM's sender, packed into one
  buffer the server maps once, or one handle per parameter), against a server started with the IPC engine;
- `nccl`: TRL's own client (VLLMClient.init_communicator, update_named_params: vLLM's packed NCCL broadcast),
  against a server started with the NCCL engine; on a shared GPU each process names itself an NCCL host of its
  own (NCCL_HOSTID, set by the caller), so the bytes go over NCCL's sockets.

Also the trainer-side memory a push adds at its peak (torch's allocator: the packed buffer; unpacked shares
the parameters themselves). Several transports of one engine run in turn in the one process (the weights
loaded once). Prints one JSON line: {transport: result}.

    python bench/gpu_push.py --url http://127.0.0.1:8000 --model-dir DIR --transports ipc-packed ipc-unpacked
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

TRANSPORTS = ("ipc-packed", "ipc-unpacked", "nccl")


def pusher(transport: str, url: str, model, group_port: int):
    """A function that pushes the model's weights once, returning when the server has them."""

    def named():
        return ((name, param.data) for name, param in model.named_parameters())

    if transport == "nccl":
        from trl.generation.vllm_client import VLLMClient

        client = VLLMClient(base_url=url, group_port=group_port, connection_timeout=60)
        client.init_communicator(device=0)
        metadata = [
            (n, str(p.dtype).removeprefix("torch."), list(p.shape)) for n, p in model.named_parameters()
        ]
        return lambda: client.update_named_params(metadata, named())
    from trlstack.rank import ipc_push

    ipc_push.PACKED_BUFFER_BYTES = (1 << 30) if transport == "ipc-packed" else None
    server = ipc_push.Server(url)
    server.join("ipc")
    largest = ipc_push.largest_parameter(model)
    return lambda: ipc_push.send(named(), server, largest)


def measure(push, pushes: int, warmup: int) -> tuple[list[float], list[int]]:
    """Seconds of each timed push, and the memory each added at its peak (bytes, torch's allocator)."""
    import torch

    seconds, extra = [], []
    for index in range(warmup + pushes):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        started = time.perf_counter()
        push()
        torch.cuda.synchronize()
        took = time.perf_counter() - started
        if index >= warmup:
            seconds.append(took)
            extra.append(torch.cuda.max_memory_allocated() - before)
    return seconds, extra


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--transports", nargs="+", choices=TRANSPORTS, required=True)
    parser.add_argument("--pushes", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1, help="pushes first, not timed")
    parser.add_argument("--group-port", type=int, default=51216)
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.bfloat16).to("cuda:0")
    pushed = sum(p.numel() * p.element_size() for p in model.parameters())
    results = {}
    for transport in args.transports:
        push = pusher(transport, args.url, model, args.group_port)
        seconds, extra = measure(push, args.pushes, args.warmup)
        median = statistics.median(seconds)
        results[transport] = {
            "tensors": len(list(model.parameters())), "bytes": pushed, "push_s": seconds, "median_s": median,
            "gb_per_s": pushed / median / 1e9, "trainer_extra_peak_mib": max(extra) / 2**20,
            "gpu": torch.cuda.get_device_name(0),
        }  # fmt: skip
    print(json.dumps(results))


if __name__ == "__main__":
    main()
