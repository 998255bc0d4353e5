"""`trlstack tiny`: offline smoke assets. Making them needs transformers (the gpu extra); refusing a folder
that holds other things does not."""

from __future__ import annotations

import json

import pytest
from trlstack.commands import tiny
from trlstack.errors import Parser, UsageError
from trlstack.options import settings_from


def args(path, rows=16):
    """`trlstack tiny PATH --rows ROWS` as the command reads it."""
    parser = Parser(prog="t")
    tiny.add_arguments(parser)
    return parser.parse_args([str(path), "--rows", str(rows)])


def test_a_folder_with_other_things_is_refused_and_left_alone(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="is not empty and was not made by `trlstack tiny`"):
        tiny.run(args(tmp_path))
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_the_settings_come_from_flags_or_variables(monkeypatch):
    monkeypatch.setenv("TRLSTACK_TINY_ROWS", "32")
    parser = Parser(prog="t")
    tiny.add_arguments(parser)
    given = settings_from(tiny.TinySettings, parser.parse_args(["d", "--seed", "3"]))
    assert given == tiny.TinySettings("d", seed=3, rows=32)
    with pytest.raises(UsageError, match="argument --rows: invalid int value: 'x'"):
        parser.parse_args(["d", "--rows", "x"])


def test_too_few_rows_is_refused(tmp_path):
    with pytest.raises(UsageError, match="--rows 2 is too few"):
        tiny.run(args(tmp_path / "new", rows=2))


def test_problems_are_prompt_only_conversations_with_a_solution():
    rows = tiny.problems(5, seed=1)
    assert rows == tiny.problems(5, seed=1)
    for row in rows:
        assert set(row) == {"prompt", "solution"}
        [message] = row["prompt"]
        assert message["role"] == "user" and message["content"].startswith("What is ")
        assert row["solution"].startswith("$") and row["solution"].endswith("$")


def test_smoke_commands_use_the_assets(tmp_path):
    commands = tiny.smoke_commands(tmp_path)
    assert commands[0] == (
        f"train grpo --cpu --model {tmp_path}/model --dataset {tmp_path}/dataset "
        f"--reward-model {tmp_path}/reward_model"
    )
    assert [c.split()[1] for c in commands] == ["grpo", "rloo", "online-dpo"]


def test_makes_a_loadable_model_tokenizer_and_dataset(tmp_path, capsys):
    pytest.importorskip("transformers", reason="making the model needs the gpu extra (transformers)")
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

    root = tmp_path / "smoke"
    assert tiny.run(args(root)) == 0
    assert tiny.run(args(root)) == 0  # again into its own folder: replaced, not refused
    assert "train grpo --cpu" in capsys.readouterr().out

    tokenizer = AutoTokenizer.from_pretrained(root / "model")
    assert (tokenizer.eos_token, tokenizer.pad_token) == ("<|im_end|>", "<|endoftext|>")
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2 + 3?"}], tokenize=False, add_generation_prompt=True
    )
    assert text.endswith("<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n")
    assert tokenizer.chat_template == tiny.chat_template()  # Qwen2.5's where TRL is installed
    assert tokenizer.decode(tokenizer("Any text: ünïcode 42")["input_ids"]) == "Any text: ünïcode 42"

    model = AutoModelForCausalLM.from_pretrained(root / "model")
    assert model.config.model_type == "qwen2"
    assert model.config.hidden_size // model.config.num_attention_heads == 64
    assert model.config.vocab_size == len(tokenizer)
    output = model.generate(**tokenizer(text, return_tensors="pt"), max_new_tokens=4)
    assert output.shape[1] > 0
    judge = AutoModelForSequenceClassification.from_pretrained(root / "reward_model")
    assert judge.config.num_labels == 1

    lines = (root / "dataset" / "train.jsonl").read_text().splitlines()
    assert len(lines) == 16 and json.loads(lines[0])["prompt"][0]["role"] == "user"
    assert json.loads((root / "tiny.json").read_text())["rows"] == 16
    assert not (root / ".partial").exists()


def test_the_chat_template_is_qwen25s_from_trl_where_trl_is_installed(tmp_path, monkeypatch):
    templates = tmp_path / "trl" / "chat_templates"
    templates.mkdir(parents=True)
    (templates / "qwen2_5.jinja").write_text("{{ 'qwen2.5' }}\n")

    class Spec:
        submodule_search_locations = [str(tmp_path / "trl")]

    monkeypatch.setattr(tiny.importlib.util, "find_spec", lambda name: Spec() if name == "trl" else None)
    assert tiny.chat_template() == "{{ 'qwen2.5' }}\n"
    monkeypatch.setattr(tiny.importlib.util, "find_spec", lambda name: None)
    assert tiny.chat_template() == tiny.CHAT_TEMPLATE  # plain ChatML without TRL
