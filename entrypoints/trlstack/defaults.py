"""The values more than one part of trlstack relies on, and every environment variable it reads or sets.

Every module takes these from here. Files that cannot import Python (compose, .env.example, scripts, the bake
file, READMEs) repeat a few of them; tests/unit/test_defaults.py checks each copy against this module.
"""

from __future__ import annotations

from enum import StrEnum

# The model the recipes and serve-vllm use when none is named: small enough for any GPU.
DEFAULT_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
LOOPBACK = "127.0.0.1"
DEFAULT_VLLM_PORT = 8000  # vLLM's HTTP API
DEFAULT_GROUP_PORT = 51216  # the NCCL group that moves weights from the trainer into vLLM
DEFAULT_DASHBOARD_PORT = 7860  # `trlstack dashboard` (trackio's own default port)
DEFAULT_MAIN_PROCESS_PORT = 29500  # where training machines meet (accelerate's and torchrun's default)
DEFAULT_VLLM_URL = f"http://{LOOPBACK}:{DEFAULT_VLLM_PORT}"
DEFAULT_HEALTH_TIMEOUT_S = 1800.0  # model download, weight loading, torch.compile and CUDA graphs
# How long one weight push to vLLM may take (train --weight-push-timeout): a 70B model's full gather and
# broadcast over NCCL sockets (ranks sharing a GPU, a trainer sharing the server's) takes minutes; NCCL's own
# watchdog (TrainingArguments.ddp_timeout) would wait 30.
DEFAULT_WEIGHT_PUSH_TIMEOUT_S = 600.0

# bf16 (and the FlashAttention kernels) need Ampere, compute capability 8.0, or newer.
BF16_CAPABILITY = (8, 0)

# The image compose, scripts/up.sh and the docs run; docker/docker-bake.hcl tags it from the same versions.
IMAGE = "trlstack:0.1.0-torch2.11-vllm0.25-cu13"

# Yes/no values as compose files and shells write them (huggingface_hub reads the same set, any case).
TRUE_VALUES = frozenset({"1", "true", "yes", "on"})
FALSE_VALUES = frozenset({"0", "false", "no", "off"})


def is_true(value: str | None) -> bool:
    """Whether a variable holds a yes (unset, empty and anything else are no)."""
    return (value or "").strip().lower() in TRUE_VALUES


class Env(StrEnum):
    """Every environment variable trlstack reads or sets, under its one spelling (a member is its name)."""

    # Settings of the roles (serve-vllm, train) and of `trlstack plan`/`doctor`; each is declared with its
    # flag beside the role's other settings.
    RECIPE = "TRLSTACK_RECIPE"
    CONFIG = "TRLSTACK_CONFIG"
    TASK = "TRLSTACK_TASK"
    MODEL = "TRLSTACK_MODEL"
    DATASET = "TRLSTACK_DATASET"
    REWARD_MODEL = "TRLSTACK_REWARD_MODEL"
    VLLM_HOST = "TRLSTACK_VLLM_HOST"
    VLLM_PORT = "TRLSTACK_VLLM_PORT"
    VLLM_URL = "TRLSTACK_VLLM_URL"
    VLLM_GROUP_PORT = "TRLSTACK_VLLM_GROUP_PORT"
    VLLM_MODE = "TRLSTACK_VLLM_MODE"
    TENSOR_PARALLEL_SIZE = "TRLSTACK_TENSOR_PARALLEL_SIZE"
    DATA_PARALLEL_SIZE = "TRLSTACK_DATA_PARALLEL_SIZE"
    GPU_MEMORY_UTILIZATION = "TRLSTACK_GPU_MEMORY_UTILIZATION"
    MAX_MODEL_LEN = "TRLSTACK_MAX_MODEL_LEN"
    DTYPE = "TRLSTACK_DTYPE"
    ALLOW_PUBLIC_BIND = "TRLSTACK_ALLOW_PUBLIC_BIND"
    ALLOW_OTHER_SERVED_MODEL = "TRLSTACK_ALLOW_OTHER_SERVED_MODEL"
    NUM_PROCESSES = "TRLSTACK_NUM_PROCESSES"
    RANKS_PER_GPU = "TRLSTACK_RANKS_PER_GPU"
    SHARDING = "TRLSTACK_SHARDING"
    SHARE_GPUS = "TRLSTACK_SHARE_GPUS"
    SERVE_GPUS = "TRLSTACK_SERVE_GPUS"
    OUTPUT_DIR = "TRLSTACK_OUTPUT_DIR"
    RESUME = "TRLSTACK_RESUME"
    FRESH = "TRLSTACK_FRESH"
    HEALTH_TIMEOUT = "TRLSTACK_HEALTH_TIMEOUT"
    CPU = "TRLSTACK_CPU"
    NUM_MACHINES = "TRLSTACK_NUM_MACHINES"
    MACHINE_RANK = "TRLSTACK_MACHINE_RANK"
    MAIN_PROCESS_IP = "TRLSTACK_MAIN_PROCESS_IP"
    MAIN_PROCESS_PORT = "TRLSTACK_MAIN_PROCESS_PORT"
    # train's bound on a weight push to vLLM, which every rank gets (rank/push_guard.py)
    WEIGHT_PUSH_TIMEOUT = "TRLSTACK_WEIGHT_PUSH_TIMEOUT"
    # train's fixed KV cache for each colocated vLLM engine, which every rank gets (rank/kv_cache.py)
    VLLM_KV_CACHE_GIB = "TRLSTACK_VLLM_KV_CACHE_GIB"
    # train's folder where a rank that ends the run early leaves why (rank/space.py, roles/train/reports.py)
    RUN_REPORTS = "TRLSTACK_RUN_REPORTS"
    # train async-grpo's pipeline (run/pipeline.py, run/asynchronous.py)
    MAX_STALENESS = "TRLSTACK_MAX_STALENESS"
    WEIGHT_SYNC_STEPS = "TRLSTACK_WEIGHT_SYNC_STEPS"
    WEIGHT_SYNC_TIMEOUT = "TRLSTACK_WEIGHT_SYNC_TIMEOUT"
    HEARTBEAT_TIMEOUT = "TRLSTACK_HEARTBEAT_TIMEOUT"
    SERVER_LOST_AFTER = "TRLSTACK_SERVER_LOST_AFTER"
    # How the trainer's weights reach the server, NCCL or CUDA IPC (transfer.py): serve-vllm, train and plan
    # read it, and train hands the choice to every rank (rank/ipc_push.py)
    WEIGHT_TRANSFER = "TRLSTACK_WEIGHT_TRANSFER"

    # Settings of `trlstack bundle`, each declared with its flag in commands/bundle/settings.py.
    BUNDLE_PYTHON_VERSION = "TRLSTACK_BUNDLE_PYTHON_VERSION"
    BUNDLE_PLATFORM = "TRLSTACK_BUNDLE_PLATFORM"
    BUNDLE_FORMAT = "TRLSTACK_BUNDLE_FORMAT"
    BUNDLE_PIECE_SIZE = "TRLSTACK_BUNDLE_PIECE_SIZE"
    BUNDLE_EXCLUDE_PRESENT = "TRLSTACK_BUNDLE_EXCLUDE_PRESENT"
    BUNDLE_KEEP_TARGET_VERSIONS = "TRLSTACK_BUNDLE_KEEP_TARGET_VERSIONS"
    BUNDLE_WITHOUT = "TRLSTACK_BUNDLE_WITHOUT"
    BUNDLE_SLIM = "TRLSTACK_BUNDLE_SLIM"
    BUNDLE_EXTRA = "TRLSTACK_BUNDLE_EXTRA"
    BUNDLE_WITH_PROJECT = "TRLSTACK_BUNDLE_WITH_PROJECT"
    BUNDLE_PROJECT = "TRLSTACK_BUNDLE_PROJECT"
    BUNDLE_PIP = "TRLSTACK_BUNDLE_PIP"
    # Settings of `trlstack dashboard`, declared with their flags in commands/dashboard.py.
    DASHBOARD_HOST = "TRLSTACK_DASHBOARD_HOST"
    DASHBOARD_PORT = "TRLSTACK_DASHBOARD_PORT"
    DASHBOARD_ALLOW_PUBLIC_BIND = "TRLSTACK_DASHBOARD_ALLOW_PUBLIC_BIND"
    # Settings of `trlstack tiny`, declared with their flags in commands/tiny.py.
    TINY_SEED = "TRLSTACK_TINY_SEED"
    TINY_ROWS = "TRLSTACK_TINY_ROWS"

    # The GPU plan as `.env` holds it (`trlstack plan --format env` writes it): compose hands these keys to
    # the roles, and to `trlstack plan --check`, which checks them as written.
    PLAN_SERVE_GPUS = "SERVE_GPUS"
    PLAN_TRAIN_GPUS = "TRAIN_GPUS"
    PLAN_TENSOR_PARALLEL_SIZE = "TENSOR_PARALLEL_SIZE"
    PLAN_DATA_PARALLEL_SIZE = "DATA_PARALLEL_SIZE"
    PLAN_NUM_PROCESSES = "NUM_PROCESSES"
    PLAN_VLLM_PORT = "VLLM_PORT"
    PLAN_VLLM_GROUP_PORT = "VLLM_GROUP_PORT"
    PLAN_SHARE_GPUS = "SHARE_GPUS"
    PLAN_GPU_MEMORY_UTILIZATION = "GPU_MEMORY_UTILIZATION"
    PLAN_WEIGHT_TRANSFER = "WEIGHT_TRANSFER"

    # Settings of `trlstack verify`, declared in commands/verify/command.py: where the image is, the parts to
    # check, the sha256s its labels give.
    VERIFY_ROOT = "TRLSTACK_VERIFY_ROOT"
    VERIFY_IMAGE = "TRLSTACK_VERIFY_IMAGE"
    VERIFY_TARBALL = "TRLSTACK_VERIFY_TARBALL"
    VERIFY_ONLY = "TRLSTACK_VERIFY_ONLY"
    VERIFY_EXPECT_LOCK_SHA256 = "TRLSTACK_VERIFY_EXPECT_LOCK_SHA256"
    VERIFY_EXPECT_SBOM_SHA256 = "TRLSTACK_VERIFY_EXPECT_SBOM_SHA256"

    # Read by the compose files and scripts/up.sh, not by the package.
    IMAGE = "TRLSTACK_IMAGE"
    VARIANT = "TRLSTACK_VARIANT"
    PRIVATE_NET = "TRLSTACK_PRIVATE_NET"
    NETWORK_INTERNAL = "TRLSTACK_NETWORK_INTERNAL"
    OUTPUTS = "TRLSTACK_OUTPUTS"
    STOP_GRACE_PERIOD = "TRLSTACK_STOP_GRACE_PERIOD"

    # Read by the tests' image build and the CI provisioning (tests/conftest.py, scripts/nix.sh).
    BASE_IMAGE = "TRLSTACK_BASE_IMAGE"
    CA_BUNDLE = "TRLSTACK_CA_BUNDLE"
    WITH_KERNEL_CACHE = "TRLSTACK_WITH_KERNEL_CACHE"
    NIX_ROOT = "TRLSTACK_NIX_ROOT"
    TESTS_MAY_PRUNE = "TRLSTACK_TESTS_MAY_PRUNE"  # .ci/run: a throwaway machine, its build cache may go
    SLURM_IMAGE = "TRLSTACK_SLURM_IMAGE"  # the test Slurm cluster's node image (tests/slurm)
    # tests/gpu: a fixed vLLM KV cache, so several test runs' servers can start side by side on one GPU
    GPU_TESTS_KV_CACHE_BYTES = "TRLSTACK_GPU_TESTS_KV_CACHE_BYTES"
    # tests/gpu/held_rank: the training rank kept out of the weight pushes from that push on
    GPU_TEST_HELD_RANK = "TRLSTACK_GPU_TEST_HELD_RANK"
    GPU_TEST_HELD_PUSH = "TRLSTACK_GPU_TEST_HELD_PUSH"
    # tests/gpu/held_server: the server holds the weight load of that push (CUDA IPC) for ever
    GPU_TEST_HELD_LOAD = "TRLSTACK_GPU_TEST_HELD_LOAD"

    # Other programs' variables: vLLM and torch.distributed (VLLM_HOST_IP is also train's --host-ip), TRL,
    # CUDA, huggingface_hub and kernels.
    VLLM_HOST_IP = "VLLM_HOST_IP"
    NCCL_HOSTID = "NCCL_HOSTID"  # NCCL's name for this host: two roles sharing a GPU must differ in it
    NCCL_SOCKET_IFNAME = "NCCL_SOCKET_IFNAME"  # the interface NCCL's sockets use (a Slurm job sets it)
    GLOO_SOCKET_IFNAME = "GLOO_SOCKET_IFNAME"  # the same for gloo (torch.distributed on the CPU)
    PET_SIGNALS_TO_HANDLE = "PET_SIGNALS_TO_HANDLE"  # torch elastic's agent: the signals it forwards itself
    VLLM_SERVER_DEV_MODE = "VLLM_SERVER_DEV_MODE"
    # vLLM unpickles CUDA-IPC handles sent over HTTP only with this set (serve-vllm sets it for IPC alone)
    VLLM_ALLOW_INSECURE_SERIALIZATION = "VLLM_ALLOW_INSECURE_SERIALIZATION"
    VLLM_USE_FLASHINFER_SAMPLER = "VLLM_USE_FLASHINFER_SAMPLER"
    TRL_EXPERIMENTAL_SILENCE = "TRL_EXPERIMENTAL_SILENCE"
    CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
    CUDA_DEVICE_ORDER = "CUDA_DEVICE_ORDER"
    HF_HOME = "HF_HOME"
    HF_HUB_CACHE = "HF_HUB_CACHE"
    HUGGINGFACE_HUB_CACHE = "HUGGINGFACE_HUB_CACHE"  # huggingface_hub's older name for HF_HUB_CACHE
    HF_HUB_OFFLINE = "HF_HUB_OFFLINE"
    XDG_CACHE_HOME = "XDG_CACHE_HOME"
    KERNELS_CACHE = "KERNELS_CACHE"
    TRACKIO_DIR = "TRACKIO_DIR"  # where trackio keeps a project's database (run/tracking.py)
    HOME = "HOME"


# What every vLLM the roles start (serve-vllm, train's colocated engine) runs with. vLLM samples top-k/top-p
# requests that want no processed log-probabilities with FlashInfer, whose kernels compile on first use; the
# pinned wheels hold no CUDA toolkit that can (torch's CUDA 13.0 headers, the nvcc 13.2 FlashInfer's tile
# compiler requires, no libcuda to link against), so such a request would end the engine. vLLM's own
# top-k/top-p sampler serves them instead; TRL's own requests never take FlashInfer's path.
VLLM_ENV: dict[str, str] = {Env.VLLM_USE_FLASHINFER_SAMPLER: "0"}
