"""`trlstack tiny DIR`: smoke-test assets made on the spot, with no network.

    DIR/model         a Qwen2-shaped causal LM (random weights, under 1M parameters), a BPE tokenizer
                      trained here, Qwen2.5's chat template (TRL's copy; plain ChatML without TRL), eos and
                      pad tokens
    DIR/reward_model  the same shape as a one-label sequence classifier, for Online DPO's judge
    DIR/dataset       prompt-only conversational arithmetic problems with a `solution` column (train.jsonl),
                      usable by the grpo, rloo and online-dpo recipes

The model's head size (64) is one vLLM's attention kernels support, so the server can serve it too.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trlstack.defaults import Env
from trlstack.errors import UsageError
from trlstack.options import add_settings, flag, setting, settings_from
from trlstack.stack import GET_GPU_STACK

MARKER = "tiny.json"
PARTS = ("model", "reward_model", "dataset")

IM_START, IM_END, PAD = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def chat_template() -> str:
    """Qwen2.5's own chat template where TRL ships a copy, else plain ChatML; both frame turns with
    <|im_start|> and <|im_end|>. TRL's AsyncGRPOTrainer parses the responses of chat templates it knows and
    refuses others, so a tiny model with the real template runs async-grpo as Qwen2.5 does."""
    spec = importlib.util.find_spec("trl")  # found, not imported: importing TRL takes seconds
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = Path(root) / "chat_templates" / "qwen2_5.jinja"
        if path.is_file():
            return path.read_text(encoding="utf-8")
    return CHAT_TEMPLATE


# Small, but shaped like the real thing: grouped-query attention, head size 64, tied embeddings.
MODEL_SHAPE = dict(
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    max_position_embeddings=2048,
    tie_word_embeddings=True,
)
VOCAB_SIZE = 1024


def problems(count: int, seed: int) -> list[dict[str, Any]]:
    """Arithmetic questions as a prompt-only conversational dataset, with the answer in `solution`."""
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        a, b = rng.randint(1, 99), rng.randint(1, 99)
        op = rng.choice("+-*")
        answer = {"+": a + b, "-": a - b, "*": a * b}[op]
        question = f"What is {a} {op} {b}? Put the final answer in \\boxed{{}}."
        rows.append({"prompt": [{"role": "user", "content": question}], "solution": f"${answer}$"})
    return rows


def corpus(rows: list[dict[str, Any]]) -> list[str]:
    """Text the tokenizer learns from: the questions, worked answers and the chat markup."""
    texts = []
    for row in rows:
        question = row["prompt"][0]["content"]
        texts.append(f"{IM_START}user\n{question}{IM_END}\n{IM_START}assistant\n")
        texts.append(f"The answer is \\boxed{{{row['solution'].strip('$')}}}.")
    texts.append("Let me think step by step. First, then, so the result is")
    return texts


def make_tokenizer(texts: list[str]) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=[PAD, IM_START, IM_END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=IM_END,
        pad_token=PAD,
        chat_template=chat_template(),
        model_max_length=MODEL_SHAPE["max_position_embeddings"],
        padding_side="left",
    )


def make_models(tokenizer: Any, seed: int) -> tuple[Any, Any]:
    """(causal LM, one-label sequence classifier) with random weights, sized for the tokenizer."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM, Qwen2ForSequenceClassification

    ids = dict(
        vocab_size=len(tokenizer),
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    policy = Qwen2ForCausalLM(Qwen2Config(**MODEL_SHAPE, **ids))
    policy.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, do_sample=True
    )
    judge = Qwen2ForSequenceClassification(Qwen2Config(**MODEL_SHAPE, **ids, num_labels=1))
    return policy, judge


def check_target(root: Path) -> None:
    """Refuse to write into a folder with things we did not make there."""
    if not root.exists():
        return
    if not root.is_dir():
        raise UsageError(f"{root} exists and is not a folder; choose a new folder for the tiny assets.")
    if any(root.iterdir()) and not (root / MARKER).is_file():
        raise UsageError(
            f"{root} is not empty and was not made by `trlstack tiny`; choose a new or empty folder "
            "(nothing in it is touched)."
        )


def make(root: Path, seed: int = 0, rows: int = 64) -> None:
    check_target(root)
    root.mkdir(parents=True, exist_ok=True)
    staging = root / ".partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()

    data = problems(rows, seed)
    (staging / "dataset").mkdir()
    with (staging / "dataset" / "train.jsonl").open("w") as out:
        out.writelines(json.dumps(row) + "\n" for row in data)

    tokenizer = make_tokenizer(corpus(data))
    policy, judge = make_models(tokenizer, seed)
    for name, model in (("model", policy), ("reward_model", judge)):
        model.save_pretrained(staging / name)
        tokenizer.save_pretrained(staging / name)

    for part in PARTS:  # swap in each finished part; an interrupted run leaves the old ones whole
        shutil.rmtree(root / part, ignore_errors=True)
        (staging / part).rename(root / part)
    staging.rmdir()
    facts = {"seed": seed, "rows": rows, "vocab_size": len(tokenizer), **MODEL_SHAPE}
    (root / MARKER).write_text(json.dumps(facts, indent=1) + "\n")


def smoke_commands(root: Path) -> list[str]:
    """Smoke runs on these assets; the reward model's scores vary, so every step has a real gradient."""
    common = (
        f"--cpu --model {root / 'model'} --dataset {root / 'dataset'} --reward-model {root / 'reward_model'}"
    )
    return [f"train {recipe} {common}" for recipe in ("grpo", "rloo", "online-dpo")]


@dataclass(frozen=True)
class TinySettings:
    """What `trlstack tiny` makes, and where. `dir` (DIR) is the command's own flag: no variable gives it."""

    dir: str = flag("folder to create (or one made by this command before)", positional=True, metavar="DIR")
    seed: int = setting(Env.TINY_SEED, "random seed of the weights and data", 0, int)
    rows: int = setting(Env.TINY_ROWS, "dataset rows (at least 8: a batch)", 64, int)


DESCRIPTION = (
    "Make a tiny random-weight Qwen2-shaped model, its tokenizer (trained here), a reward model and a "
    "small prompt dataset in DIR, without the network, for smoke runs: "
    "`train grpo --cpu --model DIR/model --dataset DIR/dataset`."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    add_settings(parser, TinySettings, os.environ)


def run(args: argparse.Namespace) -> int:
    return make_assets(settings_from(TinySettings, args))


def make_assets(settings: TinySettings) -> int:
    """Make the assets `settings` ask for and print the smoke runs they serve."""
    if settings.rows < 8:
        raise UsageError(f"--rows {settings.rows} is too few for a batch; use at least 8.")
    root = Path(settings.dir).resolve()
    check_target(root)
    try:
        import tokenizers  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as error:
        raise UsageError(
            f"`trlstack tiny` needs the GPU stack ({error.name} is missing): {GET_GPU_STACK}."
        ) from None
    make(root, seed=settings.seed, rows=settings.rows)
    print(f"made {root}/model, {root}/reward_model and {root}/dataset. Smoke runs:")
    for command in smoke_commands(root):
        print(f"  {command}")
    return 0
