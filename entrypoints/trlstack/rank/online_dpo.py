"""Online DPO training script, in the style of TRL's own `trl/scripts/grpo.py` (TRL ships no script for it).

    accelerate launch -m trlstack.rank.online_dpo --config online_dpo.yaml

The YAML takes the fields of OnlineDPOScriptArguments, trl.experimental.online_dpo.OnlineDPOConfig,
trl.ModelConfig and trl.DatasetMixtureConfig. Completions are ranked by the reward model
`reward_model_path` and/or the reward functions `reward_funcs` (the names TRL's GRPO script knows, or a
dotted import path).
"""

from dataclasses import dataclass, field
from typing import Any

from trl import ScriptArguments


@dataclass
class OnlineDPOScriptArguments(ScriptArguments):  # type: ignore[misc]  # TRL is untyped here
    """Script arguments for the Online DPO recipe.

    Args:
        reward_funcs (`list[str]`, *optional*):
            Reward functions that rank completions, alone or together with `reward_model_path`:
            `think_format_reward`, `get_soft_overlong_punishment`, `accuracy_reward`,
            `reasoning_accuracy_reward`, or any dotted import path (e.g. `my_lib.rewards.custom_reward`).
    """

    reward_funcs: list[str] | None = field(
        default=None,
        metadata={
            "help": "Reward functions: `think_format_reward`, `get_soft_overlong_punishment`, "
            "`accuracy_reward`, `reasoning_accuracy_reward`, or any dotted import path."
        },
    )


def load_reward_funcs(script_args: Any, training_args: Any) -> list[Any]:
    from trlstack.rank.rewards import named_reward_funcs

    reward_funcs: list[Any] = []
    if training_args.reward_model_path:
        reward_funcs.append(training_args.reward_model_path)  # the trainer loads it as a sequence classifier
    reward_funcs += named_reward_funcs(script_args.reward_funcs or [], training_args.max_new_tokens)
    if not reward_funcs:
        raise ValueError(
            "Online DPO needs a judge of completions: set `reward_model_path` and/or `reward_funcs`."
        )
    return reward_funcs


def main(script_args: Any, training_args: Any, model_args: Any, dataset_args: Any) -> None:
    from datasets import load_dataset
    from transformers import AutoTokenizer
    from trl import get_dataset, get_peft_config
    from trl.experimental.online_dpo import OnlineDPOTrainer

    model_init_kwargs = dict(
        revision=model_args.model_revision,
        trust_remote_code=training_args.trust_remote_code,
        attn_implementation=model_args.attn_implementation,
        dtype=model_args.dtype,
        # One full copy per process: the trainer's default (device_map="auto") would shard the model
        # across every visible GPU, which data-parallel training must not do.
        device_map=None,
    )
    model_init_kwargs.update(training_args.model_init_kwargs or {})
    training_args.model_init_kwargs = model_init_kwargs

    if dataset_args.datasets:
        dataset = get_dataset(dataset_args)
    elif script_args.dataset_name:
        dataset = load_dataset(
            script_args.dataset_name, name=script_args.dataset_config, streaming=script_args.dataset_streaming
        )
    else:
        raise ValueError("Either `datasets` or `dataset_name` must be provided.")

    tokenizer = AutoTokenizer.from_pretrained(
        model_args.model_name_or_path,
        revision=model_args.model_revision,
        trust_remote_code=training_args.trust_remote_code,
        padding_side="left",
    )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token

    trainer = OnlineDPOTrainer(
        model=model_args.model_name_or_path,
        reward_funcs=load_reward_funcs(script_args, training_args),
        args=training_args,
        train_dataset=dataset[script_args.dataset_train_split],
        eval_dataset=dataset[script_args.dataset_test_split] if training_args.eval_strategy != "no" else None,
        processing_class=tokenizer,
        peft_config=get_peft_config(model_args),
    )
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.accelerator.print("Training completed.")

    trainer.save_model(training_args.output_dir)
    trainer.accelerator.print(f"Model saved to {training_args.output_dir}.")
    if training_args.push_to_hub:
        trainer.push_to_hub(dataset_name=script_args.dataset_name)


def make_parser() -> Any:
    from trl import DatasetMixtureConfig, ModelConfig, TrlParser
    from trl.experimental.online_dpo import OnlineDPOConfig

    return TrlParser((OnlineDPOScriptArguments, OnlineDPOConfig, ModelConfig, DatasetMixtureConfig))


if __name__ == "__main__":
    parser = make_parser()
    script_args, training_args, model_args, dataset_args = parser.parse_args_and_config(
        fail_with_unknown_args=False
    )
    main(script_args, training_args, model_args, dataset_args)
