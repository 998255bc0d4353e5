"""One process of the CPU FSDP2 run (tests/unit/run/test_sharding_run.py), started by torchrun over gloo: a
tiny Qwen2 decoder, each layer and then the whole model sharded with torch's fully_shard (as accelerate's
FSDP2 plugin wraps it: TRANSFORMER_BASED_WRAP, reshard after forward), AdamW for STEPS steps from START, the
model and optimizer saved sharded with torch.distributed.checkpoint (as transformers saves a
SHARDED_STATE_DICT checkpoint: one .distcp file per process) and resumed from it. Prints one JSON line per
process."""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.fsdp import fully_shard
from transformers import Qwen2Config, Qwen2ForCausalLM

CONFIG = {
    "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "tie_word_embeddings": True,
}  # fmt: skip


def main(folder: str, start: int, steps: int) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)  # every process builds the same weights, as sync_module_states makes them
    model = Qwen2ForCausalLM(Qwen2Config(**CONFIG, attn_implementation="sdpa"))
    counted = sum(parameter.numel() for parameter in model.parameters())
    for layer in model.model.layers:
        fully_shard(layer, reshard_after_forward=True)
    fully_shard(model, reshard_after_forward=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    checkpoint = os.path.join(folder, "checkpoint")
    if start:
        model_state, optimizer_state = get_state_dict(model, optimizer)
        state = {"model": model_state, "optimizer": optimizer_state}
        dcp.load(state, checkpoint_id=checkpoint)
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
    losses = []
    for step in range(start, start + steps):
        generator = torch.Generator().manual_seed(1000 * step + rank)  # each process its own batch
        ids = torch.randint(0, CONFIG["vocab_size"], (2, 16), generator=generator)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        total = loss.detach().clone()
        dist.all_reduce(total)
        losses.append(total.item() / dist.get_world_size())
    model_state, optimizer_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=checkpoint)
    local = sum(parameter.to_local().numel() for parameter in model.parameters())
    row = {"rank": rank, "losses": losses, "parameters": counted, "local": local, "config": CONFIG}
    # One write of the whole line: the processes share torchrun's stdout, and print's separate writes of the
    # text and its newline interleave across them (two rows on one line, seen under load).
    os.write(sys.stdout.fileno(), (json.dumps(row) + "\n").encode())
    dist.barrier()  # both ranks past their last collective before either tears the group down
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
