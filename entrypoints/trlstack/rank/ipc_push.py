"""The weight push through CUDA IPC, in every training rank, where train chooses it
(TRLSTACK_WEIGHT_TRANSFER=ipc: the trainer's ranks run on the server's GPUs, on its host).

TRL 1.16's clients speak only NCCL: the first rank joins the server's workers in a process group and
broadcasts every parameter, which on a GPU the two roles share goes over NCCL's sockets (3.9 GB/s). vLLM 0.25
ships the other end of a faster path, its CUDA-IPC weight-transfer engine (`--weight-transfer-config
'{"backend": "ipc"}'`; serve-vllm starts trlstack's, vllm_engine.py, where the GPUs are shared): the trainer
hands the server CUDA-IPC handles to its own GPU tensors, keyed by the GPU's UUID, and the server's worker on
that GPU maps them and copies the weights in, at the GPU's memory speed.

The trainer side here is vLLM's own sender (`IPCWeightTransferEngine.trainer_send_weights`), given the
parameters as TRL gathers them (under FSDP2 each rank gathers every parameter in turn, as for NCCL), with a
send of our own for its HTTP step so that the push guard can name it (`Server.load`). Every rank sends: each
holds the whole parameters on its own GPU, and vLLM's sender all-gathers the ranks' handles so that a server
worker on any of these GPUs finds its own; the first rank posts them. The tensors stay alive until the
server has answered, that is until it has loaded them (vLLM's sender holds them through the send, then waits
for every rank). Mode (`choose_buffer`): packed (PACKED_BUFFER_BYTES), vLLM's bounded buffer the parameters
are copied into, which the server maps and clones out of, chunk by chunk; or, for a model of more than one
buffer whose parameters can be shared as they are, one handle per parameter.

Installed by rank/run.py before the push guard, which then bounds these pushes as it bounds TRL's: it wraps
the methods replaced here (the pushers), the walks they call, and `Server`'s steps. Replaced, in place:

- TRL's `VLLMClient.init_communicator` (GRPO, RLOO, Online DPO): ask the server for its IPC engine;
- `VLLMGeneration.sync_weights` (GRPO, RLOO) and `OnlineDPOTrainer._move_model_to_vllm`: server mode only;
- async-grpo: `WeightTransferClient.init_weight_transfer` and `.send_weights` (the first rank), and
  `AsyncGRPOTrainer._streaming_iter` in the other ranks, whose walk TRL only drains there.

With TRLSTACK_WEIGHT_TRANSFER=nccl only `init_communicator` changes: it first checks that the server's engine
is NCCL's, so that a server started for IPC is named at once rather than waited for in NCCL's rendezvous.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from trlstack.defaults import Env
from trlstack.rank.ipc_server import Server, check_backend, http_update
from trlstack.recipes import RECIPES
from trlstack.transfer import IPC, NCCL
from trlstack.vllm_plugin import import_ipc_engine

# vLLM's packed mode: the parameters are copied into one buffer of this size (at least the largest parameter)
# that the server maps and clones out of, one chunk at a time. Unpacked, one handle per parameter shares the
# parameters themselves (no copy; the server maps each one), measured faster once a model needs more than one
# buffer (bench/gpu_server_mode.py --ipc; docker/README.md, "CUDA IPC"), but wrong or costly where the walk
# hands over what it does not keep: PEFT's merged weights (its unmerge runs once the walk ends, before the
# server reads them) and FSDP2's gathered copies (vLLM's sender holds them all until the server answers).
PACKED_BUFFER_BYTES = 1 << 30

GENERATION = ("trl.generation.vllm_generation", "VLLMGeneration")
ONLINE_DPO = ("trl.experimental.online_dpo", "OnlineDPOTrainer")
CLIENT = ("trl.generation.vllm_client", "VLLMClient")
ASYNC_TRAINER = ("trl.experimental.async_grpo.async_grpo_trainer", "AsyncGRPOTrainer")
ASYNC_TRANSFER = ("trl.experimental.async_grpo.weight_transfer", "WeightTransferClient")
SERVER_ATTRIBUTE = "trlstack_ipc_server"  # where a client keeps its Server


def buffer_bytes(largest: int, packed: int | None) -> int | None:
    """The packed buffer for parameters whose largest has `largest` bytes (vLLM refuses a larger one)."""
    return None if packed is None else max(packed, largest)


def choose_buffer(total: int, largest: int, shareable: bool) -> int | None:
    """The push's packed buffer (None: one handle per parameter) for parameters of `total` bytes: packed
    where they fit one buffer (one handle, one update: faster) or cannot be shared as they are, else
    unpacked."""
    packed = total <= PACKED_BUFFER_BYTES or not shareable
    return buffer_bytes(largest, PACKED_BUFFER_BYTES if packed else None)


def model_buffer(model: Any) -> int | None:
    """choose_buffer for a model's push (every rank of a run decides alike: they hold the same model)."""
    sizes = [int(p.numel() * p.element_size()) for p in model.parameters()]
    return choose_buffer(sum(sizes), max(sizes, default=0), shares_safely(model))


def shares_safely(model: Any) -> bool:
    """Whether the walk hands over the model's own parameters, kept as they are until the server reads them:
    no PEFT adapter, no FSDP2 DTensor. Each is asked only where its library is loaded (a PEFT model or a
    DTensor loads it), so deciding imports nothing; only a torch module can carry an adapter."""
    torch = sys.modules.get("torch")
    if sys.modules.get("peft") is not None and torch is not None and isinstance(model, torch.nn.Module):
        from accelerate.utils import is_peft_model

        if is_peft_model(model):
            return False
    tensor = sys.modules.get("torch.distributed.tensor")
    return tensor is None or not any(isinstance(p, tensor.DTensor) for p in model.parameters())


def largest_parameter(model: Any) -> int:
    """Bytes of the model's largest parameter, whole (a DTensor's numel is its global size)."""
    return int(max((p.numel() * p.element_size() for p in model.parameters()), default=0))


def send(items: Iterator[tuple[str, Any]], server: Server | None, buffer: int | None) -> None:
    """Push (name, whole tensor on this rank's GPU) pairs, packed into a `buffer` of that many bytes (None:
    one handle per parameter); every rank calls it with its walk, the first with `server`, which it posts to.
    Returns once the server has loaded every parameter and every rank knows."""
    engine = import_ipc_engine()

    def post(info: Any) -> None:
        if server is None:  # vLLM's sender posts from its rank 0 only, which is the server's holder
            raise RuntimeError("a rank without the vLLM server's client was asked to post the weights")
        server.load(http_update(info))

    args = engine.IPCTrainerSendWeightsArgs(
        send_mode=post,
        packed=buffer is not None,
        **({"packed_buffer_size_bytes": buffer} if buffer is not None else {}),
    )
    if server is not None:
        server.start()
    engine.IPCWeightTransferEngine.trainer_send_weights(items, args)
    if server is not None:
        server.finish()


def server_of(client: Any) -> Server | None:
    """The Server a rank's TRL client holds (None: this rank has no client, or it never joined)."""
    return getattr(client, SERVER_ATTRIBUTE, None) if client is not None else None


def joining(transfer: str, url_of: Callable[[Any], str]) -> Callable[..., None]:
    """A client's join replaced: the engine checked (and for IPC initialised), no NCCL group."""

    def join(client: Any, *args: Any, **kwargs: Any) -> None:
        server = Server(url_of(client))
        server.join(transfer)
        setattr(client, SERVER_ATTRIBUTE, server)

    return join


def checked_join(init_communicator: Callable[..., Any]) -> Callable[..., Any]:
    """TRL's NCCL join, after checking that the server's engine is NCCL's."""

    @functools.wraps(init_communicator)
    def check_then_join(client: Any, *args: Any, **kwargs: Any) -> Any:
        check_backend(Server(client.base_url).backend(), NCCL, client.base_url)
        return init_communicator(client, *args, **kwargs)

    return check_then_join


def generation_sync(sync_weights: Callable[..., Any]) -> Callable[..., Any]:
    """VLLMGeneration.sync_weights (GRPO, RLOO): in server mode every rank sends its walk through CUDA IPC."""

    @functools.wraps(sync_weights)
    def sync_weights_ipc(generation: Any) -> None:
        if generation.mode != "server":
            sync_weights(generation)
            return
        main = generation.accelerator.is_main_process
        client = generation.vllm_client if main else None
        send(generation._iter_named_params(), server_of(client), model_buffer(generation.model))
        if client is not None:
            client.reset_prefix_cache()
        return None

    return sync_weights_ipc


def online_dpo_params(trainer: Any) -> Iterator[tuple[str, Any]]:
    """Online DPO's parameters under the names vLLM knows, each whole on this rank's GPU, as TRL's own
    `_sync_fsdp2_params_to_vllm` walks them (and its plain walk, without FSDP), adapters merged meanwhile.
    TRL sends from inside its walk, on the first rank only; here the walk is apart, so every rank sends."""
    from accelerate.utils import is_peft_model
    from torch.distributed.tensor import DTensor

    model = trainer.model
    peft = is_peft_model(model)
    if peft:
        model.merge_adapter()
    try:
        for name, param in model.named_parameters():
            extra: list[str] = []
            if peft:
                name = name.removeprefix("base_model.model.").replace(".base_layer", "")
                if model.prefix in name or "original_module" in name:
                    continue  # adapter layers are merged; a saved module's original is replaced
                extra = ["modules_to_save.default."]
            name = trainer._fix_param_name_to_vllm(name, extra_prefixes=extra)
            if param.is_cpu:
                param = param.to(trainer.accelerator.device)
            yield name, (param.full_tensor() if isinstance(param, DTensor) else param.data)
    finally:
        if peft:
            model.unmerge_adapter()


def online_dpo_move(move: Callable[..., Any]) -> Callable[..., Any]:
    """OnlineDPOTrainer._move_model_to_vllm: in server mode, every rank sends through CUDA IPC."""

    @functools.wraps(move)
    def move_ipc(trainer: Any) -> None:
        if trainer.vllm_mode != "server":
            move(trainer)
            return
        main = trainer.accelerator.is_main_process
        client = trainer.vllm_client if main else None
        # Looked up at call time: the push guard notes this walk's steps by wrapping the module's name.
        walk = globals()["online_dpo_params"]
        send(walk(trainer), server_of(client), model_buffer(trainer.model))
        if client is not None:
            client.reset_prefix_cache()
        return None

    return move_ipc


def async_send(transfer: Any, iterator: Iterator[tuple[str, Any]]) -> None:
    """WeightTransferClient.send_weights (async-grpo, the first rank): TRL's update, through CUDA IPC, packed
    (its walk is TRL's own, whose tensors trlstack does not hold to; the other ranks pack alike)."""
    info = transfer._weight_update_info
    sizes = (shape_bytes(s, dtype) for s, dtype in zip(info["shapes"], info["dtype_names"], strict=True))
    send(iterator, server_of(transfer), buffer_bytes(max(sizes, default=0), PACKED_BUFFER_BYTES))


def shape_bytes(shape: list[int], dtype_name: str) -> int:
    import math

    import torch

    return int(math.prod(shape) * getattr(torch, dtype_name).itemsize)


def async_join(transfer: Any) -> None:
    """WeightTransferClient.init_weight_transfer (async-grpo, the first rank): no NCCL group to build."""
    transfer.vllm.wait_for_server_ready()
    server = Server(transfer.vllm.server_url)
    server.join(IPC)
    setattr(transfer, SERVER_ATTRIBUTE, server)


def async_walk(walk: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    """AsyncGRPOTrainer._streaming_iter: in a rank other than the first, where TRL only drains it to take
    part in the gathers, it sends too (the first rank sends the same walk through async_send)."""

    @functools.wraps(walk)
    def walk_or_send(trainer: Any) -> Iterator[Any]:
        if trainer.accelerator.is_main_process:
            yield from walk(trainer)
            return
        model = trainer.accelerator.unwrap_model(trainer.model)
        send(walk(trainer), None, buffer_bytes(largest_parameter(model), PACKED_BUFFER_BYTES))

    return walk_or_send


def transfer_from(environ: Mapping[str, str]) -> str | None:
    """The transport train hands every rank (None: none handed, TRL's own); SystemExit for a bad value."""
    value = environ.get(Env.WEIGHT_TRANSFER) or None
    if value not in (None, IPC, NCCL):
        raise SystemExit(f"train: {Env.WEIGHT_TRANSFER}={value!r} is not ipc or nccl (train sets it)")
    return value


def load(where: tuple[str, str]) -> Any:
    return getattr(importlib.import_module(where[0]), where[1])


def install(say: Callable[[str], None], script: str, environ: Mapping[str, str]) -> str | None:
    """Replace the pushes of this rank's recipe where train chose a transport (imports TRL's modules); the
    transport, or None."""
    transfer = transfer_from(environ)
    if transfer is None:
        return None
    client = load(CLIENT)
    if transfer == NCCL:
        client.init_communicator = checked_join(client.init_communicator)
        return transfer
    import_ipc_engine()  # first: the sender's module, without ray (vllm_plugin.py)
    client.init_communicator = joining(IPC, lambda c: c.base_url)
    if script == RECIPES["async-grpo"].module:
        transfer_cls, trainer_cls = load(ASYNC_TRANSFER), load(ASYNC_TRAINER)
        transfer_cls.init_weight_transfer = async_join
        transfer_cls.send_weights = async_send
        trainer_cls._streaming_iter = async_walk(trainer_cls._streaming_iter)
    else:
        generation = load(GENERATION)
        generation.sync_weights = generation_sync(generation.sync_weights)
        if script == RECIPES["online-dpo"].module:
            trainer_cls = load(ONLINE_DPO)
            trainer_cls._move_model_to_vllm = online_dpo_move(trainer_cls._move_model_to_vllm)
    say(
        f"weights reach the vLLM server through CUDA IPC ({Env.WEIGHT_TRANSFER}=ipc): every rank hands it "
        "handles to its own GPU memory, which the server copies from"
    )
    return transfer
