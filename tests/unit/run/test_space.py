"""trlstack.run.space: room for one checkpoint before a run starts, counted from config.json (no torch)."""

from __future__ import annotations

import pytest
from trlstack.commands.tiny import MODEL_SHAPE
from trlstack.errors import UsageError
from trlstack.run.space import checkpoint_bytes, free_space, room_for_checkpoint, size

# The CPU smoke's tiny model (trlstack tiny): 358,784 parameters. Its checkpoint-1, saved by `train grpo
# --cpu` in the image, held 4,379,573 bytes: model.safetensors 1,437,848, optimizer.pt 2,892,129, the rest
# small.
TINY = {"model_type": "qwen2", "vocab_size": 490, **MODEL_SHAPE}  # its tokenizer has 490 tokens


@pytest.mark.parametrize(
    ("config", "need"),
    [
        ({}, 358_784 * 12),  # float32 weights and AdamW's two moments
        ({"model_init_kwargs": {"dtype": "bfloat16"}}, 358_784 * 6),
        ({"dtype": "bfloat16"}, 358_784 * 6),  # the config's own: async_grpo.yaml's, or ModelConfig's
        ({"optim": "adamw_torch_fused"}, 358_784 * 12),
        ({"save_only_model": True}, 358_784 * 4),
    ],
)
def test_a_checkpoint_holds_the_weights_and_adamws_two_moments(config, need):
    counted, how = checkpoint_bytes(config, TINY)
    assert counted == need and "358,784 parameters" in how


@pytest.mark.parametrize(
    ("config", "model", "why"),
    [
        ({}, None, "config.json is not readable here"),
        ({"use_peft": True}, TINY, "use_peft saves an adapter"),
        ({"optim": "adafactor"}, TINY, "optim adafactor's states are not counted"),
        ({}, {**TINY, "model_type": "gemma3"}, "model_type 'gemma3' is not one counted here"),
    ],
)
def test_a_size_that_cannot_be_counted_is_unknown_with_the_reason(config, model, why):
    counted, how = checkpoint_bytes(config, model)
    assert counted is None and why in how


def test_a_folder_without_room_for_one_checkpoint_is_refused_naming_the_fix(tmp_path):
    with pytest.raises(UsageError) as error:
        room_for_checkpoint(tmp_path, 3_100_000, 4_305_408, "358,784 parameters x 12 bytes")
    message = str(error.value)
    assert f"{tmp_path} has 3.1 MB free, and one checkpoint of this run takes at least 4.3 MB" in message
    assert "Free space there, or choose another --output-dir (TRLSTACK_OUTPUT_DIR)" in message
    assert "save_total_limit N keeps the N newest" in message


def test_room_enough_says_nothing_and_an_unknown_size_is_a_warning(tmp_path):
    assert room_for_checkpoint(tmp_path, 4_305_408, 4_305_408, "") is None
    warning = room_for_checkpoint(tmp_path, 12_000_000, None, "use_peft saves an adapter")
    assert warning is not None
    assert warning.startswith("cannot tell how much room a checkpoint needs (use_peft saves an adapter)")
    assert f"12.0 MB free for {tmp_path}" in warning


def test_free_space_is_that_of_the_nearest_folder_that_exists(tmp_path):
    assert free_space(tmp_path / "not" / "yet") == free_space(tmp_path) > 0


@pytest.mark.parametrize(
    ("count", "text"), [(0, "0 bytes"), (999, "999 bytes"), (4_305_408, "4.3 MB"), (6.1e9, "6.1 GB")]
)
def test_sizes_for_people(count, text):
    assert size(count) == text


def test_the_count_is_a_floor_of_what_the_smoke_saved():
    counted, _ = checkpoint_bytes({}, TINY)
    assert counted is not None and counted <= 4_379_573 < counted * 1.03  # as saved in the image (above)
