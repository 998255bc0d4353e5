"""Asynchronous GRPO training script, in the style of TRL's own `trl/scripts/grpo.py` (TRL 1.16 ships its
AsyncGRPOTrainer in trl.experimental with no script):

    accelerate launch -m trlstack.rank.async_grpo --config async_grpo.yaml

Generation and training overlap: a rollout worker keeps the vLLM server generating with the weights of up to
`max_staleness` steps ago while the trainer trains on what it already scored. Server mode only (the trainer
sends its weights to the server every `weight_sync_steps` steps).

The YAML takes the fields of AsyncGRPOScriptArguments, trl.experimental.async_grpo.AsyncGRPOConfig and
trl.DatasetMixtureConfig. Not trl.ModelConfig: its `dtype` and `trust_remote_code` are AsyncGRPOConfig's
too, and the trainer loads the model itself (`model_init_kwargs`, with tree-packing attention always).
Completions are scored by the reward functions `reward_funcs` (the names TRL's GRPO script knows, or a dotted
import path), in the rollout worker's process, which has no GPU: each must be picklable.
"""

from dataclasses import dataclass, field
from typing import Any

from trl import ScriptArguments


@dataclass
class AsyncGRPOScriptArguments(ScriptArguments):  # type: ignore[misc]  # TRL is untyped here
    """Script arguments for the asynchronous GRPO recipe.

    Args:
        model_name_or_path (`str`):
            The model to train, served by the vLLM server under the same name.
        reward_funcs (`list[str]`):
            Reward functions: `accuracy_reward`, `reasoning_accuracy_reward`, `think_format_reward`,
            `get_soft_overlong_punishment`, or any dotted import path (a module-level function).
        tree_attention_kernel (`str`, *optional*, defaults to `"auto"`):
            The kernel tree packing's attention calls: `hub` (TRL's, kernels-community/flash-attn3), `fa4`
            (flash-attn-4), `sdpa` (PyTorch, slower), or `auto`, the first of these that loads.
        server_lost_after_s (`float`, *optional*, defaults to `120.0`):
            End the run, naming the cause, when the vLLM server has not answered /health for this long
            (0: never).
    """

    model_name_or_path: str | None = field(default=None, metadata={"help": "The model to train."})
    reward_funcs: list[str] | None = field(
        default=None,
        metadata={
            "help": "Reward functions: `accuracy_reward`, `reasoning_accuracy_reward`, "
            "`think_format_reward`, `get_soft_overlong_punishment`, or any dotted import path."
        },
    )
    tree_attention_kernel: str = field(
        default="auto",
        metadata={
            "help": "Tree packing's attention kernel: hub, fa4, sdpa, or auto (the first that loads).",
            "choices": ["auto", "hub", "fa4", "sdpa"],
        },
    )
    server_lost_after_s: float = field(
        default=120.0,
        metadata={"help": "End the run when the vLLM server has not answered /health this long (0: never)."},
    )


def load_reward_funcs(script_args: Any, training_args: Any) -> list[Any]:
    from trlstack.rank.reward_guard import picklable
    from trlstack.rank.rewards import named_reward_funcs

    reward_funcs: list[Any] = []
    reward_funcs += named_reward_funcs(script_args.reward_funcs or [], training_args.max_completion_length)
    if not reward_funcs:
        raise ValueError("Async GRPO needs a judge of completions: set `reward_funcs`.")
    return picklable(reward_funcs)  # one that raises in the rollout worker is named with its row


RESPONSE_PARSING = (
    "async-grpo: the chat template of {model} is not one whose responses TRL's AsyncGRPOTrainer can parse "
    "(its rollout worker reads tool calls out of each completion, and TRL 1.16 knows the templates of "
    "Qwen2.5, Qwen3, Llama 3.1/3.2, Gemma 4, gpt-oss, GLM-4 MoE, Nemotron 3, LFM2 and DeepSeek-R1-Distill, "
    "or a tokenizer that sets its own response_template); train a model with one of them, or use "
    "`train grpo`."
)


def check_response_parsing(model: str, trust_remote_code: bool) -> None:
    """Refuse, before anything starts, a model whose chat template the rollout worker cannot parse responses
    of: it would fail in its own process at the first batch, with a traceback."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import add_response_schema

    tokenizer = AutoTokenizer.from_pretrained(model, trust_remote_code=trust_remote_code)
    if getattr(tokenizer, "response_template", None) or getattr(tokenizer, "response_schema", None):
        return  # as the rollout worker does: a tokenizer's own wins
    try:
        add_response_schema(tokenizer)
    except ValueError:
        raise SystemExit(RESPONSE_PARSING.format(model=model)) from None


def main(script_args: Any, training_args: Any, dataset_args: Any) -> None:
    from datasets import load_dataset
    from trl import get_dataset
    from trl.experimental.async_grpo import AsyncGRPOTrainer, async_rollout_worker, weight_transfer

    from trlstack.rank import async_guard, tree_kernel

    if not script_args.model_name_or_path:
        raise ValueError("Set `model_name_or_path`: the model to train, the one the vLLM server serves.")
    if "attn_implementation" in (training_args.model_init_kwargs or {}):
        raise ValueError(
            "AsyncGRPOTrainer always uses tree-packing attention; remove attn_implementation from "
            "model_init_kwargs (tree_attention_kernel chooses its kernel)."
        )
    check_response_parsing(script_args.model_name_or_path, bool(training_args.trust_remote_code))
    tree_kernel.install(script_args.tree_attention_kernel, async_guard.say)
    async_guard.guard(
        AsyncGRPOTrainer,
        async_rollout_worker,
        weight_transfer.WeightTransferClient,
        training_args,
        script_args.server_lost_after_s,
    )

    if dataset_args.datasets:
        dataset = get_dataset(dataset_args)
    elif script_args.dataset_name:
        dataset = load_dataset(
            script_args.dataset_name, name=script_args.dataset_config, streaming=script_args.dataset_streaming
        )
    else:
        raise ValueError("Either `datasets` or `dataset_name` must be provided.")

    trainer = AsyncGRPOTrainer(
        model=script_args.model_name_or_path,
        reward_funcs=load_reward_funcs(script_args, training_args),
        args=training_args,
        train_dataset=dataset[script_args.dataset_train_split],
    )
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.accelerator.print("Training completed.")

    trainer.save_model(training_args.output_dir)
    trainer.accelerator.print(f"Model saved to {training_args.output_dir}.")
    if training_args.push_to_hub:
        trainer.push_to_hub(dataset_name=script_args.dataset_name)


def make_parser() -> Any:
    from trl import DatasetMixtureConfig, TrlParser
    from trl.experimental.async_grpo import AsyncGRPOConfig

    return TrlParser((AsyncGRPOScriptArguments, AsyncGRPOConfig, DatasetMixtureConfig))


if __name__ == "__main__":
    parser = make_parser()
    script_args, training_args, dataset_args = parser.parse_args_and_config(fail_with_unknown_args=False)
    main(script_args, training_args, dataset_args)
