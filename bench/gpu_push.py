"""One weight-push case for bench/gpu_server_mode.py --ipc, in a process of its own: a saved model's weights
(bf16, on this process's GPU, as a trainer holds them) pushed into a running serve-vllm --pushes times, and
each push timed from the first byte handed over to the server's answer that it has loaded the last, and
split into the server's HTTP steps (start, the updates, finish) and the rest (the trainer's side: the copy
into the buffer, the handles).

- `ipc-packed` / `ipc-unpacked`: trlstack's CUDA-IPC push (rank/ipc_push.py: vLLM's sender, packed into one
  buffer the server maps once, or one handle per parameter), against a server started with trlstack's IPC
  engine (vllm_engine.py), which loads the weights in place;
- `ipc-packed-layerwise`: the same packed push, the server's engine asked for vLLM's own way instead
  (`{"in_place": false}`: every update re-materialises each layer, as vLLM's IPC engine does); run last,
  as the engine keeps what the last join asked;
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

TRANSPORTS = ("ipc-packed", "ipc-unpacked", "ipc-packed-layerwise", "nccl")


def timed_server(url: str, spent: dict):
    """ipc_push's Server, each HTTP step's seconds added to `spent` under its path."""
    from trlstack.rank import ipc_server

    class Timed(ipc_server.Server):
        def _post(self, path, payload):
            started = time.perf_counter()
            try:
                return super()._post(path, payload)
            finally:
                spent[path] = spent.get(path, 0.0) + time.perf_counter() - started

    return Timed(url)


def pusher(transport: str, url: str, model, group_port: int, spent: dict):
    """A function that pushes the model's weights once, returning when the server has them (IPC: the server's
    steps timed into `spent`)."""

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

    server = timed_server(url, spent)
    server.join("ipc", in_place=transport != "ipc-packed-layerwise")
    packed = None if transport == "ipc-unpacked" else ipc_push.PACKED_BUFFER_BYTES
    buffer = ipc_push.buffer_bytes(ipc_push.largest_parameter(model), packed)
    return lambda: ipc_push.send(named(), server, buffer)


def measure(push, pushes: int, warmup: int, spent: dict) -> tuple[list[float], list[int], list[dict]]:
    """Seconds of each timed push, the memory each added at its peak (bytes, torch's allocator), and each
    one's seconds per server step."""
    import torch

    seconds, extra, steps = [], [], []
    for index in range(warmup + pushes):
        spent.clear()
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
            steps.append(dict(spent))
    return seconds, extra, steps


def split(seconds: list[float], steps: list[dict]) -> dict:
    """The median seconds of each server step and of the rest of a push (the trainer's side)."""
    if not steps or not steps[0]:
        return {}
    paths = sorted({path for step in steps for path in step})
    medians = {path.strip("/"): statistics.median(step.get(path, 0.0) for step in steps) for path in paths}
    medians["trainer side (rest)"] = statistics.median(
        took - sum(step.values()) for took, step in zip(seconds, steps, strict=True)
    )
    return medians


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
        spent: dict = {}
        push = pusher(transport, args.url, model, args.group_port, spent)
        seconds, extra, steps = measure(push, args.pushes, args.warmup, spent)
        median = statistics.median(seconds)
        results[transport] = {
            "tensors": len(list(model.parameters())), "bytes": pushed, "push_s": seconds, "median_s": median,
            "gb_per_s": pushed / median / 1e9, "trainer_extra_peak_mib": max(extra) / 2**20,
            "gpu": torch.cuda.get_device_name(0), "split_s": split(seconds, steps),
        }  # fmt: skip
    print(json.dumps(results))


if __name__ == "__main__":
    main()
