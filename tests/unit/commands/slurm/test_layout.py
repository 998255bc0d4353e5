"""Who does what in a job: server and trainer nodes, and the GPU plan."""

from __future__ import annotations

from trlstack.commands.slurm.layout import make_layout

from .harness import settings


def test_the_layout_follows_the_plan():
    layout = make_layout(settings(nodes=4, tensor_parallel_size=2))
    assert (layout.mode, layout.serve_nodes, layout.train_nodes) == ("server", 1, 3)
    assert layout.plan is not None
    assert (layout.plan.tensor_parallel_size, layout.plan.data_parallel_size) == (2, 4)
    assert layout.local_gpus("serve") == layout.local_gpus("train") == "0,1,2,3,4,5,6,7"
    colocate = make_layout(settings(nodes=2, serve_nodes=0))
    assert (colocate.mode, colocate.train_nodes, colocate.plan) == ("colocate", 2, None)
