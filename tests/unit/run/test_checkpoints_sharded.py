"""checkpoints.sharded_over: the processes an FSDP2 checkpoint was saved by, from its own files."""

from __future__ import annotations

from trlstack.run.checkpoints import sharded_over


def test_a_sharded_checkpoint_counts_its_distcp_files(tmp_path):
    shards = tmp_path / "pytorch_model_fsdp_0"
    shards.mkdir()
    for name in ("__0_0.distcp", "__1_0.distcp", "__2_0.distcp", ".metadata"):
        (shards / name).write_bytes(b"")
    assert sharded_over(tmp_path) == 3


def test_a_whole_checkpoint_is_none(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert sharded_over(tmp_path) is None
