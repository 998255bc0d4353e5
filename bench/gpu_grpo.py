"""GRPO seconds per step, vLLM generation (colocate) against plain transformers `generate`, on one CUDA GPU.

The model has Qwen2.5-0.5B's architecture (config values copied, random weights: no Hub); its tokenizer is a
byte-level BPE trained on the spot to the same vocabulary size, so every sampled id decodes. Every
completion is forced to exactly --completion-tokens tokens (EOS ignored, minimum = maximum length), so both
modes generate the same work. Each mode runs in its own process, side by side in one invocation; the first
--skip steps (compilation, CUDA graphs, allocator warm-up) are left out of the median.

    python bench/gpu_grpo.py --out bench/results/gpu_grpo.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import string
import sys
import tempfile
import time
from pathlib import Path

from children import run_case  # bench/, the script's folder
from trlstack.commands.tiny import chat_template

MODES = ["vllm-colocate", "generate"]
# Needs a vLLM server on another GPU (--server-url); bench/gpu_server_mode.py starts one and runs this mode.
SERVER_MODE = "vllm-server"

# Qwen/Qwen2.5-0.5B's config.json values (494M parameters).
QWEN25_05B = dict(
    vocab_size=151936,
    hidden_size=896,
    intermediate_size=4864,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    max_position_embeddings=32768,
    rope_theta=1_000_000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
    bos_token_id=0,
    eos_token_id=0,
)


def words(count: int) -> list[str]:
    """Distinct four-letter words: 'aaaa', 'aaab', ..."""
    return [
        "".join(letters)
        for letters in itertools.islice(itertools.product(string.ascii_lowercase, repeat=4), count)
    ]


def make_tokenizer(directory: Path, vocab: int) -> None:
    """A byte-level BPE tokenizer of `vocab` ids trained here on made-up words (Qwen2's tokenizer class loads
    it; every id decodes)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = words(160_000)
    tokenizer.train_from_iterator(
        (" ".join(corpus[i : i + 100]) for i in range(0, len(corpus), 100)), trainer
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        chat_template=chat_template(),  # Qwen2.5's, which async-grpo's response parsing knows
    )
    fast.save_pretrained(directory)


def make_model(directory: Path, shape: dict = QWEN25_05B, tokenizer: Path | None = None) -> None:
    """Random Qwen2-shaped weights (bf16, made on the GPU when there is one) and a tokenizer of the same
    vocabulary size: copied from `tokenizer` when given, else trained here."""
    import shutil

    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    if tokenizer is None:
        make_tokenizer(directory, shape["vocab_size"])
    else:
        shutil.copytree(tokenizer, directory, dirs_exist_ok=True)
    torch.manual_seed(0)
    config = Qwen2Config(**shape, dtype="bfloat16")
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(directory)


def reward_early_letters(completions, **_) -> list[float]:
    """Share of words starting with a-e (the made-up words start with a-j): varies between samples, so the
    advantages are not all zero."""
    return [sum(word[:1] < "f" for word in text.split()) / max(1, len(text.split())) for text in completions]


def grpo_shape(args: argparse.Namespace, vllm: bool) -> dict:
    """The GRPO step every GPU benchmark measures: batch, group, fixed-length completions (the same generation
    work with and without vLLM), steps; no saving or reporting."""
    n = args.completion_tokens
    return dict(
        per_device_train_batch_size=args.batch,
        num_generations=args.generations,
        max_completion_length=n,
        generation_kwargs={"min_tokens": n, "ignore_eos": True} if vllm else {"min_new_tokens": n},
        max_steps=args.steps,
        learning_rate=1e-6,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_vllm=vllm,
    )


def one_mode(mode: str, model_dir: str, args: argparse.Namespace) -> dict:
    """Run in a child process: GRPO for --steps steps; return per-step wall-clock times and logged metrics."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    vocabulary = words(5000)
    prompts = [" ".join(vocabulary[(7 * i + j) % 5000] for j in range(args.prompt_words)) for i in range(512)]
    dataset = Dataset.from_dict({"prompt": prompts})
    vllm = mode in ("vllm-colocate", SERVER_MODE)
    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix=f"grpo-{mode}-"),
        **grpo_shape(args, vllm),
        bf16=torch.cuda.is_available(),
        vllm_mode="server" if mode == SERVER_MODE else "colocate",
        vllm_server_base_url=args.server_url,
        vllm_gpu_memory_utilization=0.3,
        model_init_kwargs={"dtype": torch.bfloat16, "attn_implementation": "sdpa"},
        seed=0,
    )

    class StepTimes(TrainerCallback):
        def __init__(self):
            self.times: list[float] = []
            self.last = None

        def on_step_begin(self, *_, **__):
            torch.cuda.synchronize()
            self.last = time.perf_counter()

        def on_step_end(self, *_, **__):
            torch.cuda.synchronize()
            self.times.append(time.perf_counter() - self.last)

    clock = StepTimes()
    started = time.perf_counter()
    trainer = GRPOTrainer(
        model=model_dir,
        reward_funcs=reward_early_letters,
        args=config,
        train_dataset=dataset,
        callbacks=[clock],
    )
    init_s = time.perf_counter() - started
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    lengths = [entry.get("completions/mean_length") for entry in logs]
    timed = clock.times[args.skip :]
    return {
        "init_s": init_s,
        "step_s": clock.times,
        "median_step_s": statistics.median(timed),
        "timed_steps": len(timed),
        "completion_mean_length": lengths,
        "loss": [entry["loss"] for entry in logs],
        "reward": [entry.get("reward") for entry in logs],
        "trl_step_time_s": [entry.get("step_time") for entry in logs],
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
    }


def run_child(mode: str, model_dir: str, args: argparse.Namespace) -> dict:
    argv = [sys.executable, __file__, "--child", mode, model_dir] + args.passthrough
    env = {**os.environ, "VLLM_USE_FLASHINFER_SAMPLER": os.environ.get("VLLM_USE_FLASHINFER_SAMPLER", "0")}
    return run_case(argv, args.mode_timeout, env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/gpu_grpo.json"))
    parser.add_argument("--child", nargs=2, metavar=("MODE", "MODEL_DIR"), help=argparse.SUPPRESS)
    knobs = parser.add_argument_group("run shape (passed to each mode)")
    knobs.add_argument("--steps", type=int, default=8)
    knobs.add_argument("--skip", type=int, default=2, help="first steps left out of the median")
    knobs.add_argument(
        "--batch", type=int, default=16, help="completions per step (per_device_train_batch_size)"
    )
    knobs.add_argument("--generations", type=int, default=8, help="completions per prompt")
    knobs.add_argument("--completion-tokens", type=int, default=256)
    knobs.add_argument("--prompt-words", type=int, default=64)
    parser.add_argument("--mode-timeout", type=int, default=420)
    parser.add_argument("--modes", nargs="*", default=MODES, choices=[*MODES, SERVER_MODE])
    knobs.add_argument("--server-url", help=f"the vLLM server of the {SERVER_MODE} mode")
    args = parser.parse_args()
    shape = ("steps", "skip", "batch", "generations", "completion_tokens", "prompt_words", "server_url")
    args.passthrough = [
        arg
        for key in shape
        if getattr(args, key) is not None
        for arg in (f"--{key.replace('_', '-')}", str(getattr(args, key)))
    ]
    if args.child:
        print(json.dumps(one_mode(args.child[0], args.child[1], args)))
        return 0

    import torch

    with tempfile.TemporaryDirectory(prefix="grpo-model-") as model_dir:
        make_model(Path(model_dir))
        results = []
        for mode in args.modes:
            case = {"mode": mode, **run_child(mode, model_dir, args)}
            results.append(case)
            shown = (
                f"{case['median_step_s']:.2f} s/step (init {case['init_s']:.0f} s)"
                if case["status"] == "ok"
                else f"failed: {case['reason'][:200]}"
            )
            print(f"{mode:>14}  {shown}", flush=True)
    by_mode = {c["mode"]: c for c in results if c["status"] == "ok"}
    speedup = None
    if {"generate", "vllm-colocate"} <= by_mode.keys():
        speedup = by_mode["generate"]["median_step_s"] / by_mode["vllm-colocate"]["median_step_s"]
        print(f"vLLM colocate is {speedup:.1f}x faster per step than plain generate")
    report = {
        "benchmark": "GRPO seconds per optimizer step, vLLM colocate vs transformers generate",
        "model": {
            "architecture": "Qwen2ForCausalLM (Qwen2.5-0.5B config values, random weights)",
            **QWEN25_05B,
        },
        "steps": args.steps,
        "skipped_steps": args.skip,
        "completions_per_step": args.batch,
        "generations_per_prompt": args.generations,
        "completion_tokens": args.completion_tokens,
        "prompt_words": args.prompt_words,
        "precision": "bf16 weights, bf16 autocast; sdpa attention",
        "gpu": torch.cuda.get_device_name(0),
        "results": results,
        "speedup_vllm_colocate_vs_generate": speedup,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
