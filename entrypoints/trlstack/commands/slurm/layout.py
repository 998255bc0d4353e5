"""Who does what in a job: how many nodes serve and train, and on GPUs the plan over all the job's GPUs."""

from __future__ import annotations

from dataclasses import dataclass

from trlstack.commands.slurm.settings import SlurmSettings
from trlstack.errors import UsageError
from trlstack.gpus import Gpu
from trlstack.plan import Plan, make_plan
from trlstack.recipes import RECIPES


@dataclass(frozen=True)
class Layout:
    """Who does what: server and trainer node counts, and on GPUs the plan over all the job's GPUs."""

    serve_nodes: int
    train_nodes: int
    gpus_per_node: int | None
    plan: Plan | None  # GPU runs with a server node

    @property
    def mode(self) -> str:
        """ "server" (vLLM on the first node), "colocate" (vLLM inside every trainer) or "cpu"."""
        if self.gpus_per_node is None:
            return "cpu"
        return "server" if self.serve_nodes else "colocate"

    def local_gpus(self, role: str) -> str:
        """CUDA_VISIBLE_DEVICES of a role's node as the plan gives it (node-local indices)."""
        assert self.gpus_per_node is not None
        if self.plan is None:
            return ",".join(map(str, range(self.gpus_per_node)))
        gpus = self.plan.serve if role == "serve" else self.plan.train[: self.gpus_per_node]
        return ",".join(str(gpu.index % self.gpus_per_node) for gpu in gpus)


def make_layout(settings: SlurmSettings) -> Layout:
    """The layout of a job; UsageError naming the fix for a request that cannot run."""
    if settings.nodes < 2:
        raise UsageError(
            f"--nodes {settings.nodes}: a Slurm run spans at least 2 nodes (one serves, one trains). On one "
            "machine use compose (scripts/up.sh) or `train` directly."
        )
    if settings.serve_nodes >= settings.nodes:
        raise UsageError(
            f"--serve-nodes {settings.serve_nodes} with --nodes {settings.nodes} leaves no node to train on; "
            f"raise --nodes or use --serve-nodes 1."
        )
    if settings.serve_nodes not in (0, 1):
        raise UsageError(
            f"--serve-nodes {settings.serve_nodes}: one vLLM server node is supported (TRL's client talks to "
            "one server); use --serve-nodes 1, or 0 to generate inside every trainer (vLLM colocate)."
        )
    train_nodes = settings.nodes - settings.serve_nodes
    if settings.train.cpu:
        if settings.gpus_per_node is not None:
            raise UsageError(
                f"--cpu requests no GPUs, but --gpus-per-node {settings.gpus_per_node} asks for them; "
                "drop one of the two."
            )
        return Layout(settings.serve_nodes, train_nodes, None, None)
    if settings.gpus_per_node is None:
        raise UsageError("name the GPUs of each node: --gpus-per-node G (e.g. 8), or --cpu for a smoke run.")
    g = settings.gpus_per_node
    if not settings.serve_nodes:
        if getattr(RECIPES.get(settings.recipe), "server_only", False):
            raise UsageError(
                f"--serve-nodes 0 puts vLLM inside every trainer, but {settings.recipe} generates only "
                "through a vLLM server (TRL's AsyncGRPOTrainer sends it requests while it trains); use "
                "--serve-nodes 1."
            )
        return Layout(0, train_nodes, g, None)
    # The plan over every GPU of the job: the server node's GPUs serve, the trainer nodes' GPUs train.
    cluster = [Gpu(index) for index in range(settings.nodes * g)]
    plan = make_plan(
        cluster,
        serve_gpus=list(range(g)),
        train_gpus=list(range(g, settings.nodes * g)),
        tensor_parallel_size=settings.tensor_parallel_size,
        num_heads=settings.num_heads,
        port=settings.ports.port,
        group_port=settings.ports.group_port,
        where=f"the server node's {g} GPUs: --gpus-per-node {g}",
    )
    return Layout(1, train_nodes, g, plan)
