"""Where a colocated GRPO step goes on one GPU, which one-GPU settings are fastest, how large a model fits.

Every case runs in its own process, side by side in one invocation, on random-weight Qwen2.5-shaped models (a
tokenizer trained on the spot, as in bench/gpu_grpo.py), every completion forced to --completion-tokens:

- `generate`: vLLM alone, the engine TRL builds in colocate mode (same memory fraction, batch limits,
  sampling, log-probabilities), generating the step's completions from the same prompt ids;
- `train`: TRL's GRPO step with generation replaced by fixed completions of the same length (the same trainer
  code: rewards, loss, backward, optimizer), i.e. the training step alone;
- `grpo`: the real colocated GRPO step, split into phases with TRL's own profiling points (timed with CUDA
  synchronisation): weight sync into vLLM, generation (with sleep/wake when enabled), rewards, the old
  log-probabilities forward, the loss forward, backward, optimizer, and the rest.

The overhead ratio is step / (generate alone + train alone). Cases differ by model shape and by a variant of
settings (`VARIANTS`). Each invocation starts with an empty vLLM compile cache of its own: the first case of a
shape that builds an engine compiles (`"compile_cache": "cold"`), later ones reuse it ("warm"), so their times
to the first finished step give the cold and warm start-up (the `startup` plan runs one case twice for that).
While each case runs, nvidia-smi is sampled every 250 ms: `device_peak_mib` is the GPU's memory in use, vLLM's
own allocations included (sleep mode frees them while training; torch's peak counter does not show that).

    python bench/gpu_grpo_breakdown.py --plan levers --out bench/results/gpu_grpo_breakdown.json
    python bench/gpu_grpo_breakdown.py --plan sizes --out bench/results/gpu_grpo_sizes.json
    python bench/gpu_grpo_breakdown.py --plan memory --out bench/results/gpu_grpo_memory.json
    python bench/gpu_grpo_breakdown.py --plan startup --out bench/results/gpu_grpo_startup.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from children import run_case  # noqa: E402
from gpu_grpo import QWEN25_05B, grpo_shape, make_model, make_tokenizer, reward_early_letters, words  # noqa: E402

STARTED = time.time()  # the child process's start, for the time to the first finished step

# Qwen2.5 config values (random weights). The tokenizer is trained to 151936 ids; the 7B shape keeps that
# vocabulary (its real one has 152064 rows, 0.1% more parameters) so every sampled id decodes.
SHAPES = {
    "0.5B": QWEN25_05B,
    "1.5B": {**QWEN25_05B, "hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28,
             "num_attention_heads": 12, "num_key_value_heads": 2},
    "3B": {**QWEN25_05B, "hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36,
           "num_attention_heads": 16, "num_key_value_heads": 2},
    "7B": {**QWEN25_05B, "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
           "num_attention_heads": 28, "num_key_value_heads": 4, "tie_word_embeddings": False},
}  # fmt: skip

# GRPOConfig settings per variant, over TRL 1.16's own defaults (colocate: vllm_gpu_memory_utilization 0.3,
# gradient_checkpointing True, no sleep mode, no Liger).
VARIANTS: dict[str, dict] = {
    "trl": {},
    "no-ckpt": {"gradient_checkpointing": False},
    "sleep": {"vllm_enable_sleep_mode": True},
    "liger": {"use_liger_kernel": True},
    "no-ckpt-sleep": {"gradient_checkpointing": False, "vllm_enable_sleep_mode": True},
}

# (kind, shape, variant) cases of each plan, run in this order (grouped by shape, in order of first mention).
PLANS = {
    "levers": [
        ("generate", "0.5B", "trl"),  # the two parts alone first: the denominators of the overhead ratio
        ("train", "0.5B", "trl"),
        ("train", "0.5B", "no-ckpt"),
        ("grpo", "0.5B", "trl"),
        ("grpo", "0.5B", "no-ckpt"),
        ("grpo", "0.5B", "sleep"),
        ("grpo", "0.5B", "liger"),
    ],
    "sizes": [
        ("grpo", "3B", "no-ckpt"),
        ("grpo", "3B", "trl"),
        ("grpo", "7B", "no-ckpt"),
        ("grpo", "7B", "trl"),
        ("grpo", "7B", "no-ckpt-sleep"),
        ("grpo", "1.5B", "no-ckpt"),
        ("grpo", "1.5B", "trl"),
    ],
    "memory": [  # what sleep mode frees, on the GPU as a whole
        ("grpo", "0.5B", "trl"),
        ("grpo", "0.5B", "sleep"),
        ("grpo", "7B", "no-ckpt"),
        ("grpo", "7B", "no-ckpt-sleep"),
    ],
    "startup": [("grpo", "0.5B", "no-ckpt"), ("grpo", "0.5B", "no-ckpt")],  # compile cache cold, then warm
    "smoke": [("train", "tiny", "trl"), ("grpo-generate", "tiny", "trl")],  # CPU check of this script
}
SHAPES["tiny"] = {**QWEN25_05B, "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
                  "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1}  # fmt: skip

# TRL's profiling points (and a few wrapped calls), named as phases. Each phase counts its own time only: time
# spent in a nested point goes to that point. Log-probabilities computed while preparing the batch are the old
# (and reference) ones; inside compute_loss they are the loss's own forward.
PHASES = {
    "weight sync": "weight sync",
    "vLLM.generate": "generation",
    "transformers.generate": "generation",
    "sleep/wake": "sleep/wake",
    "_calculate_rewards": "rewards",
    "_prepare_inputs": "batch preparation (rest)",
    "compute_loss": "loss (rest)",
    "backward": "backward",
}
IGNORED = {
    "sync_weights"
}  # TRL's point around the weight sync; the sync itself is wrapped (it nests sleep/wake)


def cuda_sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


class Phases:
    """Seconds per phase for each optimizer step, exclusive of nested phases."""

    def __init__(self) -> None:
        self.steps: list[dict[str, float]] = []
        self.current: dict[str, float] = {}
        self.stack: list[list] = []  # [name, seconds spent in nested phases]

    def add(self, phase: str, seconds: float) -> None:
        self.current[phase] = self.current.get(phase, 0.0) + seconds

    def phase(self, name: str) -> str:
        if name == "_get_per_token_logps_and_entropies":
            return "loss forward" if self.inside("compute_loss") else "old logprobs"
        if self.inside("_calculate_rewards"):
            return "rewards"  # each reward function's own point
        return PHASES.get(name, name)

    def inside(self, name: str) -> bool:
        return any(entry[0] == name for entry in self.stack)

    @contextlib.contextmanager
    def timed(self, name: str):
        if name in IGNORED:
            yield
            return
        cuda_sync()
        self.stack.append([name, 0.0])
        start = time.perf_counter()
        try:
            yield
        finally:
            cuda_sync()
            seconds = time.perf_counter() - start
            _, nested = self.stack.pop()
            if self.stack:
                self.stack[-1][1] += seconds
            self.add(self.phase(name), seconds - nested)

    def wrap(self, owner, attribute: str, name: str) -> None:
        original = getattr(owner, attribute)

        def timed_call(*args, **kwargs):
            with self.timed(name):
                return original(*args, **kwargs)

        setattr(owner, attribute, timed_call)

    def install(self, trainer) -> None:
        """Time TRL's profiling points (made to synchronise), the weight sync, sleep/wake and backward."""
        from trl.extras import profiling

        phases = self
        prefix = f"{type(trainer).__name__}."

        class Timed(profiling.ProfilingContext):
            def __enter__(self):
                self._phase = phases.timed(self.name.removeprefix(prefix))
                self._phase.__enter__()
                return self

            def __exit__(self, *exc):
                return self._phase.__exit__(*exc)

        profiling.ProfilingContext = Timed
        self.wrap(trainer.accelerator, "backward", "backward")
        generation = getattr(trainer, "vllm_generation", None)
        if generation is not None:
            self.wrap(generation, "sync_weights", "weight sync")
        engine = getattr(generation, "llm", None)  # colocate only: a server sleeps on its own
        if engine is not None:
            self.wrap(engine, "sleep", "sleep/wake")
            self.wrap(engine, "wake_up", "sleep/wake")


def make_callback(phases: Phases, first_step: list[float]):
    from transformers import TrainerCallback

    class StepClock(TrainerCallback):
        def on_step_begin(self, *_, **__):
            cuda_sync()
            self.start = time.perf_counter()

        def on_pre_optimizer_step(self, *_, **__):
            cuda_sync()
            self.optimizer_start = time.perf_counter()

        def on_optimizer_step(self, *_, **__):
            cuda_sync()
            phases.add("optimizer", time.perf_counter() - self.optimizer_start)

        def on_step_end(self, *_, **__):
            cuda_sync()
            total = time.perf_counter() - self.start
            if not first_step:
                first_step.append(time.time() - STARTED)
            step = {**phases.current, "step": total}
            step["other"] = total - sum(phases.current.values())
            phases.steps.append(step)
            phases.current = {}

    return StepClock()


def dataset_and_prompts(args):
    """The prompts, and a dataset of them loaded from a JSON Lines file (as a user's data is: no hashing of
    an in-memory table)."""
    from datasets import load_dataset

    vocabulary = words(5000)
    prompts = [" ".join(vocabulary[(7 * i + j) % 5000] for j in range(args.prompt_words)) for i in range(512)]
    path = Path(tempfile.mkdtemp(prefix="grpo-prompts-")) / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": prompt}) + "\n" for prompt in prompts))
    return load_dataset("json", data_files=str(path), split="train"), prompts


def grpo_config(kind: str, variant: str, args, output_dir: str):
    import torch
    from trl import GRPOConfig

    gpu = torch.cuda.is_available()
    settings = dict(
        output_dir=output_dir,
        **grpo_shape(args, vllm=kind in ("grpo", "grpo-server")),
        bf16=gpu,
        use_cpu=not gpu,
        vllm_mode="server" if kind == "grpo-server" else "colocate",
        # The server a grpo-server case trains against (bench/gpu_server_mode.py starts it).
        vllm_server_base_url=os.environ.get("BENCH_SERVER_URL"),
        model_init_kwargs={"dtype": torch.bfloat16 if gpu else torch.float32, "attn_implementation": "sdpa"},
        seed=0,
    )
    settings.update(VARIANTS[variant])
    return GRPOConfig(**settings)


def fixed_completions(trainer, tokens: int):
    """Replace generation with fixed completions of `tokens` ids (no EOS): the training step alone."""
    import random

    rng = random.Random(0)
    vocab = trainer.model.config.vocab_size
    eos = set(trainer.eos_token_ids)
    pool = [i for i in range(3, min(vocab, 5000)) if i not in eos]

    def generate(prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        return [[rng.choice(pool) for _ in range(tokens)] for _ in prompt_ids], None

    trainer._generate_single_turn = generate


def run_trainer(kind: str, shape: str, variant: str, model_dir: str, args) -> dict:
    import torch
    from trl import GRPOTrainer

    dataset, _ = dataset_and_prompts(args)
    phases = Phases()
    first_step: list[float] = []
    with tempfile.TemporaryDirectory(prefix="grpo-out-") as output_dir:
        config = grpo_config(kind if kind in ("grpo", "grpo-server") else "train", variant, args, output_dir)
        trainer_after_s = time.time() - STARTED  # imports and data, before the trainer is made
        if (
            os.environ.get("TRLSTACK_WEIGHT_TRANSFER") == "ipc"
        ):  # bench/gpu_server_mode.py --ipc: as train's ranks
            from trlstack.rank import ipc_push

            ipc_push.install(lambda line: None, "trl.scripts.grpo", os.environ)
        started = time.perf_counter()
        trainer = GRPOTrainer(
            model=model_dir,
            reward_funcs=reward_early_letters,
            args=config,
            train_dataset=dataset,
            callbacks=[make_callback(phases, first_step)],
        )
        init_s = time.perf_counter() - started
        if kind == "train":
            fixed_completions(trainer, args.completion_tokens)
        phases.install(trainer)
        trainer.train()
    timed = phases.steps[args.skip :]
    names = sorted({name for step in timed for name in step})
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    return {
        "init_s": init_s,
        "trainer_after_s": trainer_after_s,
        "first_step_after_s": first_step[0] if first_step else None,
        "steps": phases.steps,
        "median_s": {name: statistics.median(step.get(name, 0.0) for step in timed) for name in names},
        "timed_steps": len(timed),
        "completion_mean_length": [entry.get("completions/mean_length") for entry in logs],
        "loss": [entry["loss"] for entry in logs],
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "gpu_memory_gib": torch.cuda.get_device_properties(0).total_memory / 2**30
        if torch.cuda.is_available()
        else None,
    }


def run_generate(shape: str, variant: str, model_dir: str, args) -> dict:
    """vLLM alone with the engine settings TRL's colocate mode uses, on the same prompt ids."""
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams

    settings = {**grpo_defaults(), **VARIANTS[variant]}
    _, prompts = dataset_and_prompts(args)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # The engine as TRL 1.16's colocate mode builds it (trl/generation/vllm_generation.py): in this process
    # (external launcher, as rank 0 of 1), the same batch limits, sampling log-probabilities and seed.
    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    started = time.perf_counter()
    llm = LLM(
        model=model_dir,
        tensor_parallel_size=1,
        gpu_memory_utilization=settings["vllm_gpu_memory_utilization"],
        max_num_seqs=args.batch,
        enable_sleep_mode=bool(settings.get("vllm_enable_sleep_mode")),
        distributed_executor_backend="external_launcher",
        seed=0,
        max_num_batched_tokens=4096,
        logprobs_mode="processed_logprobs",
    )
    init_s = time.perf_counter() - started
    n = args.completion_tokens
    sampling = SamplingParams(
        n=1, temperature=1.0, top_p=1.0, top_k=0, min_p=0.0, max_tokens=n, logprobs=0, min_tokens=n,
        ignore_eos=True,
    )  # fmt: skip
    per_step = args.batch // args.generations
    times = []
    for step in range(args.steps):
        batch = prompts[step * per_step : (step + 1) * per_step]
        ids = [
            {"prompt_token_ids": tokenizer(p)["input_ids"]} for p in batch for _ in range(args.generations)
        ]
        cuda_sync()
        start = time.perf_counter()
        outputs = llm.generate(ids, sampling_params=sampling, use_tqdm=False)
        cuda_sync()
        times.append(time.perf_counter() - start)
        assert all(len(o.outputs[0].token_ids) == n for o in outputs)
    timed = times[args.skip :]
    return {"init_s": init_s, "steps": [{"generation": t} for t in times],
            "median_s": {"generation": statistics.median(timed)}, "timed_steps": len(timed)}  # fmt: skip


def grpo_defaults() -> dict:
    from trl import GRPOConfig

    fields = GRPOConfig.__dataclass_fields__
    return {name: fields[name].default for name in ("vllm_gpu_memory_utilization", "gradient_checkpointing")}


def child(kind: str, shape: str, variant: str, model_dir: str, args) -> dict:
    if kind == "generate":
        return run_generate(shape, variant, model_dir, args)
    if kind == "grpo-generate":  # CPU smoke of the phase timing, transformers generating
        return run_trainer("grpo-generate", shape, variant, model_dir, args)
    return run_trainer(kind, shape, variant, model_dir, args)


def run_child(case: tuple[str, str, str], model_dir: str, args) -> dict:
    """The case in a process of its own, with the GPU's memory in use sampled meanwhile."""
    argv = [sys.executable, __file__, "--child", *case, model_dir, *args.passthrough]
    env = {
        **os.environ,
        "VLLM_CACHE_ROOT": str(args.compile_cache),
        # vLLM's own top-k/top-p sampler, as train runs it (trlstack.defaults.VLLM_ENV)
        "VLLM_USE_FLASHINFER_SAMPLER": os.environ.get("VLLM_USE_FLASHINFER_SAMPLER", "0"),
    }
    with tempfile.TemporaryFile("w+") as samples:
        try:
            sampler = subprocess.Popen(SAMPLE_MEMORY, stdout=samples, stderr=subprocess.DEVNULL)
        except FileNotFoundError:  # no nvidia-smi: a CPU run
            return run_case(argv, args.case_timeout, env)
        try:
            result = run_case(argv, args.case_timeout, env)
        finally:
            sampler.terminate()
            sampler.wait()
        samples.seek(0)
        used = [int(line) for line in samples.read().split() if line.isdigit()]
    return {**result, "device_peak_mib": max(used, default=None)}


SAMPLE_MEMORY = ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-lms", "250"]


def overhead(results: list[dict]) -> list[dict]:
    """step / (generate alone + train alone) for each grpo case with both parts measured at its shape."""
    ok = {(r["kind"], r["shape"], r["variant"]): r for r in results if r["status"] == "ok"}
    ratios = []
    for (kind, shape, variant), case in ok.items():
        generate = ok.get(("generate", shape, "trl"))  # the engine is the same for every training variant
        train = ok.get(("train", shape, variant))
        if kind != "grpo" or not generate or not train:
            continue
        alone = generate["median_s"]["generation"] + train["median_s"]["step"]
        ratios.append({"shape": shape, "variant": variant, "step_s": case["median_s"]["step"],
                       "generate_alone_s": generate["median_s"]["generation"],
                       "train_alone_s": train["median_s"]["step"],
                       "ratio": case["median_s"]["step"] / alone})  # fmt: skip
    return ratios


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", choices=PLANS, default="levers")
    parser.add_argument("--out", type=Path, default=Path("bench/results/gpu_grpo_breakdown.json"))
    parser.add_argument("--child", nargs=4, metavar=("KIND", "SHAPE", "VARIANT", "MODEL_DIR"))
    parser.add_argument(
        "--make-model", nargs=3, metavar=("SHAPE", "DIR", "TOKENIZER"), help=argparse.SUPPRESS
    )
    parser.add_argument("--only", nargs="*", help="run only the plan's cases whose shape is listed")
    knobs = parser.add_argument_group("run shape (passed to each case)")
    knobs.add_argument("--steps", type=int, default=6)
    knobs.add_argument("--skip", type=int, default=2, help="first steps left out of the medians")
    knobs.add_argument("--batch", type=int, default=16, help="completions per step")
    knobs.add_argument("--generations", type=int, default=8, help="completions per prompt")
    knobs.add_argument("--completion-tokens", type=int, default=256)
    knobs.add_argument("--prompt-words", type=int, default=64)
    parser.add_argument("--case-timeout", type=int, default=400)
    parser.add_argument("--deadline", type=float, default=float("inf"), help="start no case after S seconds")
    parser.add_argument("--models", type=Path, help="folder for the random models (default: a temporary one)")
    args = parser.parse_args()
    shape_keys = ("steps", "skip", "batch", "generations", "completion_tokens", "prompt_words")
    args.passthrough = [f"--{k.replace('_', '-')}={getattr(args, k)}" for k in shape_keys]
    if args.child:
        kind, shape, variant, model_dir = args.child
        print(json.dumps(child(kind, shape, variant, model_dir, args)))
        return 0
    if args.make_model:  # in a process of its own, so this one never holds GPU memory the cases need
        shape, directory, tokenizer = args.make_model
        if not Path(tokenizer).exists():
            make_tokenizer(Path(tokenizer), SHAPES[shape]["vocab_size"])
        make_model(Path(directory), SHAPES[shape], tokenizer=Path(tokenizer))
        return 0

    cases = [case for case in PLANS[args.plan] if not args.only or case[1] in args.only]
    root = Path(args.models or tempfile.mkdtemp(prefix="grpo-models-"))
    # Empty: each shape's first engine compiles.
    args.compile_cache = Path(tempfile.mkdtemp(prefix="grpo-vllm-cache-"))
    compiled: set[str] = set()
    started = time.perf_counter()
    results: list[dict] = []

    def write_report() -> dict:  # after every case, so a run cut short keeps what it measured
        report = {
            "benchmark": "GRPO colocated on one GPU: step breakdown, one-GPU settings and model sizes",
            "plan": args.plan,
            "shapes": {shape: SHAPES[shape] for shape in dict.fromkeys(s for _, s, _ in cases)},
            "variants": VARIANTS,
            **{k: getattr(args, k) for k in shape_keys},
            "gpu": next((r["gpu"] for r in results if r.get("gpu")), None),
            "versions": versions(),
            "results": results,
            "overhead": overhead(results),
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n")
        return report

    for shape in dict.fromkeys(shape for _, shape, _ in cases):
        model_dir = root / shape
        if time.perf_counter() - started > args.deadline:
            late = {"status": "skipped", "reason": f"past --deadline {args.deadline} s"}
            results += [
                {"kind": c[0], "shape": c[1], "variant": c[2], **late} for c in cases if c[1] == shape
            ]
            continue
        made_at = time.perf_counter()
        if not (model_dir / "config.json").exists():
            tokenizer = root / f"tokenizer-{SHAPES[shape]['vocab_size']}"
            made = [sys.executable, __file__, "--make-model", shape, str(model_dir), str(tokenizer)]
            subprocess.run(made, check=True)
        print(f"{shape}: model ready in {time.perf_counter() - made_at:.0f} s", flush=True)
        for case in [c for c in cases if c[1] == shape]:
            result = {"kind": case[0], "shape": case[1], "variant": case[2]}
            if time.perf_counter() - started > args.deadline:
                result.update(status="skipped", reason=f"past --deadline {args.deadline} s")
            else:
                if case[0] in ("generate", "grpo"):  # the cases that build a vLLM engine
                    result["compile_cache"] = "warm" if shape in compiled else "cold"
                    compiled.add(shape)
                result.update(run_child(case, str(model_dir), args))
            results.append(result)
            write_report()
            shown = (
                " ".join(f"{k}={v:.3f}" for k, v in result["median_s"].items())
                + f" init={result['init_s']:.0f}s peak={result.get('peak_memory_gib') or 0:.1f}GiB"
                if result["status"] == "ok"
                else f"{result['status']}: {result['reason'][:300]}"
            )
            print(f"{' '.join(case):>24}  {shown}", flush=True)
        if args.models is None:
            shutil.rmtree(model_dir, ignore_errors=True)
    shutil.rmtree(args.compile_cache, ignore_errors=True)
    report = write_report()
    for row in report["overhead"]:
        print(f"overhead {row['shape']} {row['variant']}: {row['ratio']:.2f}", flush=True)
    print(f"wrote {args.out}")
    return 0


def versions() -> dict:
    from importlib import metadata

    names = (
        "torch",
        "vllm",
        "trl",
        "transformers",
        "accelerate",
        "kernels",
        "liger-kernel",
        "flashinfer-python",
    )
    found = {}
    for name in names:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[name] = metadata.version(name)
    return found


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
