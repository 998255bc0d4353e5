"""trlstack.run.asynchronous: `train async-grpo`'s command and config, what it refuses and why, and its
pipeline settings applied (flag, variable, the config's value kept when neither is given); the settings'
declarations: run/test_pipeline.py."""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml
from launch_harness import gpus, launch_tail
from trlstack.errors import UsageError
from trlstack.recipes import RECIPES
from trlstack.roles.command_line import parse_role
from trlstack.roles.train.main import ROLE
from trlstack.run.asynchronous import sharding_for
from trlstack.run.launch import LAUNCHER, build_launch
from trlstack.run.settings import TrainSettings

ASYNC = yaml.safe_load(RECIPES["async-grpo"].bundled_config.read_text())
TAIL = launch_tail("trlstack.rank.async_grpo", "outputs/async-grpo/trlstack-async-grpo.yaml")


# The server a run names (compose and trlstack slurm name one): on one GPU a run that names none is refused
# (test_one_gpu_without_a_server_named_is_refused_naming_both_ways_to_one).
SERVER = "http://127.0.0.1:8000"


def launch(settings=None, config=ASYNC, n=1, **kwargs):
    settings = settings or TrainSettings(recipe="async-grpo")
    if settings.vllm_url is None:
        settings = replace(settings, vllm_url=SERVER)
    return build_launch(settings, config, "async_grpo.yaml", gpus(n), **kwargs)


def test_one_gpu_without_a_server_named_is_refused_naming_both_ways_to_one():
    with pytest.raises(UsageError) as error:
        build_launch(TrainSettings(recipe="async-grpo"), ASYNC, "async_grpo.yaml", gpus(1))
    message = str(error.value)
    assert "async-grpo generates only through a vLLM server, and on this one GPU none is named" in message
    assert (
        "`serve-vllm --share-gpus` then `train async-grpo --share-gpus --vllm-url http://127.0.0.1:8000`"
        in (message)
    )
    assert "`trlstack plan --share-gpus --format env -o .env` then `docker compose up async-grpo`" in message
    # a server named in any way (its address, or the GPUs it shares) is one to train against
    for named in ({"vllm_mode": "server"}, {"share_gpus": True}, {"vllm_url": SERVER}):
        chosen = build_launch(TrainSettings(recipe="async-grpo", **named), ASYNC, "a.yaml", gpus(1))
        assert chosen.mode == "server"


def test_one_gpu_runs_the_recipe_through_the_runner_without_distributed_options():
    done = launch()
    assert done.command.argv == [
        *LAUNCHER, "--num_processes", "1", "--num_machines", "1", "--mixed_precision", "bf16",
        "--dynamo_backend", "no", *TAIL,
    ]  # fmt: skip
    assert done.command.env["TRL_EXPERIMENTAL_SILENCE"] == "1"


def test_the_config_names_the_server_alone_and_keeps_the_users_keys():
    settings = TrainSettings(recipe="async-grpo", vllm_url="http://vllm:8000", host_ip="trainer")
    config = launch(settings, is_local=lambda address: address == "trainer").config
    assert config["vllm_server_base_url"] == "http://vllm:8000"
    # AsyncGRPOConfig has none of these: TRL chooses the weight-transfer port itself
    assert not {"use_vllm", "vllm_mode", "vllm_group_port"} & set(config)
    assert {key: config[key] for key in ASYNC if key != "output_dir"} == {
        key: value for key, value in ASYNC.items() if key != "output_dir"
    }
    assert config["bf16"] is True and config["fp16"] is False


def test_no_attention_is_chosen_tree_packing_is_the_trainers_own():
    done = launch()
    assert "attn_implementation" not in (done.config.get("model_init_kwargs") or {})
    assert any("tree packing" in note for note in done.notes)


def test_an_attention_in_model_init_kwargs_is_refused_naming_the_kernel_setting():
    config = {**ASYNC, "model_init_kwargs": {"attn_implementation": "sdpa"}}
    with pytest.raises(UsageError, match="tree-packing attention.*tree_attention_kernel"):
        launch(config=config)


def test_two_gpus_shard_with_fsdp2_as_trl_needs_whatever_the_memory_says():
    done = launch(n=2)
    assert done.sharding == "fsdp2" and done.processes == 2
    assert done.command.argv[:4] == [*LAUNCHER, "--config_file"]
    assert any("FSDP2, which TRL's AsyncGRPOTrainer needs" in note for note in done.notes)


def test_two_gpus_unsharded_are_refused_naming_the_fix():
    with pytest.raises(UsageError, match="--sharding none .*only sharded with FSDP2. Use --sharding fsdp2"):
        launch(TrainSettings(recipe="async-grpo", sharding="none"), n=2)


@pytest.mark.parametrize(("processes", "machines"), [(3, 1), (4, 1), (8, 1), (2, 2), (1, 3)])
def test_more_than_two_trainer_ranks_are_refused_naming_the_hangs(processes, machines):
    with pytest.raises(UsageError, match=f"{processes * machines} trainer processes.*6797 and 7103"):
        sharding_for(processes * machines, "auto")


@pytest.mark.parametrize("asked", ["auto", "none", "fsdp2"])
def test_one_process_keeps_the_sharding_asked(asked):
    assert sharding_for(1, asked) == (asked, [])


def test_two_processes_over_two_machines_are_sharded_too():
    assert sharding_for(2, "auto")[0] == "fsdp2"


@pytest.mark.parametrize(
    ("settings", "fix"),
    [
        (TrainSettings(recipe="async-grpo", cpu=True), "try `train grpo --cpu`"),
        (TrainSettings(recipe="async-grpo", vllm_mode="colocate"), "Start the server"),
        (TrainSettings(recipe="async-grpo", reward_model="org/rm"), "set reward_funcs"),
    ],
)
def test_what_only_a_server_gives_is_refused_with_the_reason(settings, fix):
    with pytest.raises(UsageError, match="only through a vLLM server|without a GPU") as error:
        launch(settings)
    assert fix in str(error.value)


def test_the_weight_push_timeout_is_refused_naming_async_grpos_own_bound(clean_env):
    settings, _ = parse_role(ROLE, TrainSettings, ["async-grpo"], {"TRLSTACK_WEIGHT_PUSH_TIMEOUT": "900"})
    with pytest.raises(UsageError, match="--weight-push-timeout .*--weight-sync-timeout") as error:
        launch(settings)
    assert "TRL's own weight transfer" in str(error.value)
    assert "TRLSTACK_WEIGHT_PUSH_TIMEOUT" not in launch().command.env  # nor passed on unasked


def test_server_mode_given_explicitly_is_the_same_run():
    assert launch(TrainSettings(recipe="async-grpo", vllm_mode="server")).command == launch().command


@pytest.mark.parametrize(
    ("argv", "key", "value"),
    [
        (["--max-staleness", "2"], "max_staleness", 2),
        (["--max-staleness", "0"], "max_staleness", 0),
        (["--weight-sync-steps", "4"], "weight_sync_steps", 4),
        (["--weight-sync-timeout", "600"], "weight_sync_timeout", 600),
        (["--heartbeat-timeout", "90"], "heartbeat_stale_after_s", 90.0),
        (["--server-lost-after", "30"], "server_lost_after_s", 30.0),
        (["--server-lost-after", "0"], "server_lost_after_s", 0.0),
    ],
)
def test_each_pipeline_flag_sets_its_config_key(argv, key, value):
    settings, _ = parse_role(ROLE, TrainSettings, ["async-grpo", *argv], {})
    assert launch(settings).config[key] == value


def test_the_variables_set_them_too_and_a_flag_wins(clean_env):
    environ = {"TRLSTACK_MAX_STALENESS": "3", "TRLSTACK_WEIGHT_SYNC_STEPS": "2"}
    settings, _ = parse_role(ROLE, TrainSettings, ["async-grpo", "--max-staleness", "1"], environ)
    config = launch(settings).config
    assert (config["max_staleness"], config["weight_sync_steps"]) == (1, 2)


def test_unset_the_configs_values_stand():
    config = launch(config={**ASYNC, "max_staleness": 6, "weight_sync_steps": 3}).config
    assert (config["max_staleness"], config["weight_sync_steps"]) == (6, 3)


@pytest.mark.parametrize("recipe", ["grpo", "rloo", "online-dpo"])
def test_the_pipeline_settings_are_refused_for_the_other_recipes(recipe):
    with pytest.raises(UsageError, match=f"--weight-sync-steps .*only async-grpo has; this run is {recipe}"):
        build_launch(TrainSettings(recipe=recipe, weight_sync_steps=2), ASYNC, "x.yaml", gpus(1))


def test_the_bundled_config_holds_trls_defaults_for_the_pipeline():
    # TRL 1.16's AsyncGRPOConfig defaults; the YAML's comments say why each is what it is
    expected = {
        "max_staleness": 4,
        "weight_sync_steps": 1,
        "weight_sync_timeout": 1800,
        "heartbeat_stale_after_s": 300.0,
        "request_timeout": 600,
        "max_inflight_tasks": -1,
    }
    assert {key: ASYNC[key] for key in expected} == expected
    assert ASYNC["server_lost_after_s"] == 120.0 and ASYNC["tree_attention_kernel"] == "auto"
