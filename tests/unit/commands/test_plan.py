"""`trlstack plan` as a user types it: the splits, the formats, the output file, the check of a plan in .env,
and every bad request refused with the fix."""

from __future__ import annotations

import json
import os

import pytest
from cli_runs import H200S, PLAN_VARIABLES, assert_refused, run


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in (*PLAN_VARIABLES, "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)


# The catalogue: each bad input gets exit 1, a message naming the cause and the fix, no output, no exec.
# (gpus the machine reports or None for no driver, argv, environment, words the message must hold)
NO_DRIVER = None
BAD = [
    ([], ("plan", "--gpus", "1", "--serve-gpus", "0"), {}, ["leaves no GPU to train on", "--share-gpus"]),
    ([], ("plan", "--gpus", "2", "--share-gpus", "--serve-gpus", "0", "--train-gpus", "1"), {}, ["differ"]),
    ([], ("plan", "--gpus", "2", "--share-gpus", "--serve", "1"), {}, ["give one of the two"]),
    ([], ("plan", "--gpus", "2", "--gpu-memory-utilization", "1.5"), {}, ["not a fraction"]),
    (NO_DRIVER, ("plan",), {}, ["no GPU found on this machine", "NVML", "--gpus N", "trlstack doctor"]),
    (H200S[:4], ("plan",), {"CUDA_VISIBLE_DEVICES": ""}, ["hides every GPU", "unset it"]),
    (H200S[:4], ("plan",), {"CUDA_VISIBLE_DEVICES": "5"}, ["CUDA_VISIBLE_DEVICES='5' names GPU 5", "0-3"]),
    (H200S[:4], ("plan",), {"CUDA_VISIBLE_DEVICES": "0,0"}, ["names GPU 0 twice"]),
    (H200S[:4], ("plan",), {"CUDA_VISIBLE_DEVICES": "first"}, ["neither a GPU index nor a GPU UUID"]),
    ([], ("plan", "--gpus", "0"), {}, ["argument --gpus: 0 is not a positive whole number"]),
    ([], ("plan", "--gpus", "eight"), {}, ["argument --gpus: 'eight' is not a whole number"]),
    (
        [],
        ("plan", "--gpus", "8", "--serve-gpus", "0-3", "--train-gpus", "3-7"),
        {},
        ["GPU 3 is in both", "--share-gpus"],
    ),
    ([], ("plan", "--gpus", "8", "--serve-gpus", "0-3,2"), {}, ["--serve-gpus '0-3,2' names GPU 2 twice"]),
    ([], ("plan", "--gpus", "8", "--serve-gpus", "3-0"), {}, ["range 3-0 is reversed; write 0-3"]),
    ([], ("plan", "--gpus", "8", "--train-gpus", "-1"), {}, ["--train-gpus '-1' has the negative index -1"]),
    ([], ("plan", "--gpus", "8", "--serve-gpus", "0;1"), {}, ["'0;1' is not an index or a range"]),
    ([], ("plan", "--gpus", "8", "--serve-gpus", "0,,1"), {}, ["empty entry"]),
    ([], ("plan", "--gpus", "8", "--serve-gpus", ""), {}, ["--serve-gpus is empty"]),
    # Digits of other scripts: int() and str.isdigit() read them, CUDA_VISIBLE_DEVICES and compose do not.
    ([], ("plan", "--gpus", "4", "--serve-gpus", "٣"), {}, ["'٣' is not an index or a range", "0-3,5"]),
    ([], ("plan", "--gpus", "4", "--serve-gpus", "²"), {}, ["'²' is not an index or a range"]),
    (
        [],
        ("plan", "--gpus", "٤"),
        {},
        ["--gpus: '٤' is not a whole number (write it with the digits"],
    ),
    ([], ("plan", "--gpus", "2", "--port", "٨٠٠٠"), {}, ["argument --port: '٨٠٠٠' is not a TCP port"]),
    (H200S[:4], ("plan",), {"CUDA_VISIBLE_DEVICES": "١"}, ["'١' is neither a GPU index nor a GPU UUID"]),
    (H200S[:4], ("plan",), {"CUDA_VISIBLE_DEVICES": "²"}, ["'²' is neither a GPU index nor a GPU UUID"]),
    ([], ("plan", "--gpus", "2", "-o", ""), {}, ["--output is empty; name a file such as .env"]),
    ([], ("plan", "--gpus", "2", "-o", "/proc/x/.env"), {}, ["cannot write /proc/x/.env", "writable path"]),
    ([], ("plan", "--gpus", "4", "--serve-gpus", "4-5"), {}, ["names GPU 4, which does not exist", "0-3"]),
    ([], ("plan", "--gpus", "4", "--serve-gpus", "0-3"), {}, ["leaves no GPU to train on"]),
    ([], ("plan", "--gpus", "4", "--serve", "4"), {}, ["--serve 4 must leave at least one GPU on each side"]),
    ([], ("plan", "--gpus", "4", "--serve", "2", "--train-gpus", "3"), {}, ["either --serve N or"]),
    ([], ("plan", "--gpus", "8", "--tensor-parallel-size", "3"), {}, ["does not divide the 4 serving GPUs"]),
    (
        [],
        ("plan", "--gpus", "8", "--tensor-parallel-size", "4", "--num-heads", "14"),
        {},
        ["does not divide the model's 14 attention heads", "choose one of 1, 2"],
    ),
    ([], ("plan", "--gpus", "8", "--num-heads", "0"), {}, ["argument --num-heads: 0 is not a positive"]),
    ([], ("plan", "--gpus", "2", "--port", "70000"), {}, ["argument --port: 70000 is not a TCP port"]),
    ([], ("plan", "--gpus", "2", "--port", "http"), {}, ["argument --port: 'http' is not a TCP port"]),
    ([], ("plan", "--gpus", "2", "--group-port", "8000"), {}, ["--port and --group-port are both 8000"]),
    ([], ("plan", "--gpus", "2", "--format", "yaml"), {}, ["invalid choice: 'yaml'", "trlstack plan --help"]),
    ([], ("plan", "--gpus", "2", "--colour"), {}, ["unrecognized arguments: --colour"]),
    (
        [],
        ("plan", "--gpus", "2"),
        {"TRLSTACK_VLLM_PORT": "abc"},
        ["TRLSTACK_VLLM_PORT='abc' is not valid", "unset"],
    ),
    (
        [],
        ("plan", "--gpus", "2"),
        {"TRLSTACK_VLLM_GROUP_PORT": "0"},
        ["TRLSTACK_VLLM_GROUP_PORT='0' is not valid"],
    ),
    (
        [],
        ("plan", "--gpus", "2"),
        {"TRLSTACK_TENSOR_PARALLEL_SIZE": "-2"},
        ["TRLSTACK_TENSOR_PARALLEL_SIZE='-2' is not valid for --tensor-parallel-size"],
    ),
    (
        [],
        ("plan", "--gpus", "2"),
        {"TRLSTACK_VLLM_PORT": "51216"},
        ["--port and --group-port are both 51216"],
    ),
    (
        [],
        ("plan", "--check"),
        {"SERVE_GPUS": "0-3", "TRAIN_GPUS": "4"},
        ["SERVE_GPUS='0-3' in .env", "write SERVE_GPUS=0,1,2,3"],
    ),
    (
        [],
        ("plan", "--check"),
        {"SERVE_GPUS": "0,1", "TRAIN_GPUS": "1,2"},
        ["GPU 1 is in both SERVE_GPUS=0,1"],
    ),
    ([], ("plan", "--check"), {"SERVE_GPUS": "", "TRAIN_GPUS": "1"}, ["SERVE_GPUS is not set"]),
    ([], ("plan", "--service", "vllm"), {}, ["--service names what --check checks", "add --check"]),
    ([], ("plan", "--gpus", "1", "--gpu-memory-utilization", "0.5"), {}, ["runs no server", "--share-gpus"]),
    (
        H200S[:1],
        ("plan",),
        {"TRLSTACK_TENSOR_PARALLEL_SIZE": "2"},
        ["TRLSTACK_TENSOR_PARALLEL_SIZE) needs that many GPUs", "the one-GPU plan runs none"],
    ),
]


@pytest.mark.parametrize(("found", "argv", "environ", "words"), BAD, ids=[" ".join(case[1]) for case in BAD])
def test_bad_input_exits_1_with_the_fix_and_starts_nothing(
    found, argv, environ, words, capsys, monkeypatch, machine, no_exec
):
    assert_refused(capsys, monkeypatch, machine, found, argv, environ, words)


def test_plan_for_eight_gpus_as_env(capsys):
    code, out, _ = run(capsys, "plan", "--gpus", "8", "--format", "env")
    assert code == 0
    assert out.splitlines()[1:] == [
        "SERVE_GPUS=0,1,2,3",
        "TRAIN_GPUS=4,5,6,7",
        "TENSOR_PARALLEL_SIZE=1",
        "DATA_PARALLEL_SIZE=4",
        "NUM_PROCESSES=4",
        "VLLM_PORT=8000",
        "VLLM_GROUP_PORT=51216",
        "SHARE_GPUS=0",
        "GPU_MEMORY_UTILIZATION=0.9",
        "WEIGHT_TRANSFER=nccl",
    ]


def test_plan_for_one_gpu_is_colocate_with_the_reason_and_the_server_only_when_chosen(capsys):
    code, out, _ = run(capsys, "plan", "--gpus", "1")
    assert code == 0
    assert "train  0" in out and "vLLM inside it (train --vllm-mode colocate)" in out
    assert "layout: colocate, vLLM inside the trainer: measured faster on one GPU" in out
    code, out, _ = run(capsys, "plan", "--gpus", "1", "--format", "env")
    assert code == 0 and out.splitlines()[1:] == [
        "TRLSTACK_VARIANT=colocate",
        "TRAIN_GPUS=0",
        "NUM_PROCESSES=1",
    ]
    code, out, _ = run(capsys, "plan", "--gpus", "1", "--share-gpus")
    assert code == 0
    assert "layout: shared GPUs: vLLM takes 0.3 of each GPU's memory" in out
    assert "weights are pushed through CUDA IPC" in out and "--weight-transfer nccl for NCCL sockets" in out
    code, out, _ = run(capsys, "plan", "--gpus", "1", "--share-gpus", "--weight-transfer", "nccl")
    assert code == 0 and "weights are pushed over NCCL sockets, not P2P/NVLink" in out
    argv = ("plan", "--gpus", "1", "--share-gpus", "--format", "env", "--gpu-memory-utilization", "0.4")
    code, out, _ = run(capsys, *argv)
    assert code == 0 and out.splitlines()[1:] == [
        "SERVE_GPUS=0",
        "TRAIN_GPUS=0",
        "TENSOR_PARALLEL_SIZE=1",
        "DATA_PARALLEL_SIZE=1",
        "NUM_PROCESSES=1",
        "VLLM_PORT=8000",
        "VLLM_GROUP_PORT=51216",
        "SHARE_GPUS=1",
        "GPU_MEMORY_UTILIZATION=0.4",
        "WEIGHT_TRANSFER=ipc",
    ]


def test_plan_check_of_a_colocate_plan_and_of_a_service_that_needs_a_server(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no .env here: the environment alone, as in compose's plan-check container
    for key, value in {"TRLSTACK_VARIANT": "colocate", "TRAIN_GPUS": "0", "SERVE_GPUS": ""}.items():
        monkeypatch.setenv(key, value)
    code, out, err = run(capsys, "plan", "--check", "--service", "grpo")
    assert (code, out) == (0, "")
    assert err == (
        "trlstack plan: TRLSTACK_VARIANT=colocate: training on TRAIN_GPUS=0 with vLLM inside the trainer, "
        "no server\n"
    )
    code, out, err = run(capsys, "plan", "--check", "--service", "async-grpo")
    assert (code, out) == (1, "")
    assert "async-grpo generates only through a vLLM server (it has no colocate mode), but" in err
    assert "`trlstack plan --share-gpus --format env -o .env`" in err and "Traceback" not in err


def test_plan_shares_several_gpus_only_when_asked(capsys):
    code, out, _ = run(capsys, "plan", "--gpus", "4", "--share-gpus", "--format", "json")
    document = json.loads(out)
    assert code == 0 and document["serve_gpus"] == document["train_gpus"] == [0, 1, 2, 3]
    assert document["share_gpus"] is True and document["gpu_memory_utilization"] == 0.3
    code, out, _ = run(
        capsys, "plan", "--gpus", "4", "--share-gpus", "--train-gpus", "2,3", "--format", "json"
    )
    document = json.loads(out)
    assert code == 0 and document["serve_gpus"] == document["train_gpus"] == [2, 3]


@pytest.mark.parametrize(
    ("n", "serve", "train"), [(2, [0], [1]), (4, [0, 1], [2, 3]), (8, [0, 1, 2, 3], [4, 5, 6, 7])]
)
def test_plan_json_for_2_4_8_gpus(capsys, n, serve, train):
    code, out, _ = run(capsys, "plan", "--gpus", str(n), "--format", "json")
    document = json.loads(out)
    assert code == 0 and (document["serve_gpus"], document["train_gpus"]) == (serve, train)


def test_plan_detects_the_visible_gpus_and_shows_their_uuids(capsys, machine, monkeypatch):
    machine(H200S)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    code, out, _ = run(capsys, "plan")
    assert code == 0
    assert "serve  4,5" in out and "train  6,7" in out and "GPU-0007-h200" in out and "GPU-0000" not in out


def test_plan_check_passes_a_plan_it_wrote(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    for key, value in {
        "SERVE_GPUS": "0,1",
        "TRAIN_GPUS": "2,3",
        "NUM_PROCESSES": "2",
        "VLLM_PORT": "",
    }.items():
        monkeypatch.setenv(key, value)
    code, out, err = run(capsys, "plan", "--check")
    assert (code, out) == (0, "")
    assert (
        err
        == "trlstack plan: SERVE_GPUS=0,1 and TRAIN_GPUS=2,3 are disjoint; vLLM on 2 GPUs (tensor-parallel "
        "1 x data-parallel 2), training on 2\n"
    )


def test_plan_check_on_the_host_reads_the_env_file_compose_reads_under_the_environment(
    capsys, monkeypatch, tmp_path
):
    monkeypatch.chdir(tmp_path)
    for key in ("SERVE_GPUS", "TRAIN_GPUS", "TRLSTACK_VARIANT", "SHARE_GPUS", "NUM_PROCESSES"):
        monkeypatch.delenv(key, raising=False)
    (tmp_path / ".env").write_text("# written by hand\nexport SERVE_GPUS=0\nTRAIN_GPUS='1'\n")
    code, _, err = run(capsys, "plan", "--check")
    assert code == 0 and "SERVE_GPUS=0 and TRAIN_GPUS=1 are disjoint" in err
    monkeypatch.setenv("TRAIN_GPUS", "0")  # the shell's value wins over .env's, as in compose
    code, _, err = run(capsys, "plan", "--check")
    assert code == 1 and "TRAIN_GPUS=0" in err and "Traceback" not in err
    monkeypatch.delenv("TRAIN_GPUS")
    (tmp_path / ".env").write_text("SERVE_GPUS=0\n")
    code, _, err = run(capsys, "plan", "--check")
    assert code == 1 and "TRAIN_GPUS is not set; write .env with `trlstack plan --format env -o .env`" in err
    (tmp_path / ".env").write_text("SERVE_GPUS=0\nTRAIN_GPU=1\n")  # a key misspelled by hand
    code, _, err = run(capsys, "plan", "--check")
    assert code == 1 and "TRAIN_GPUS is not set (TRAIN_GPU is set: rename it TRAIN_GPUS)" in err


def test_plan_takes_the_split_flags(capsys):
    argv = (
        "plan",
        "--gpus",
        "8",
        "--serve-gpus",
        "0-5",
        "--train-gpus",
        "6,7",
        "--tensor-parallel-size",
        "2",
    )
    code, out, _ = run(
        capsys, *argv, "--num-heads", "16", "--port", "9000", "--group-port", "9001", "--format", "json"
    )
    document = json.loads(out)
    assert code == 0
    assert document["env"] == {
        "SERVE_GPUS": "0,1,2,3,4,5",
        "TRAIN_GPUS": "6,7",
        "TENSOR_PARALLEL_SIZE": "2",
        "DATA_PARALLEL_SIZE": "3",
        "NUM_PROCESSES": "2",
        "VLLM_PORT": "9000",
        "VLLM_GROUP_PORT": "9001",
        "SHARE_GPUS": "0",
        "GPU_MEMORY_UTILIZATION": "0.9",
        "WEIGHT_TRANSFER": "nccl",
    }


def test_plan_reads_ports_and_tensor_parallel_size_from_the_roles_environment(capsys, monkeypatch):
    monkeypatch.setenv("TRLSTACK_VLLM_PORT", "8100")
    monkeypatch.setenv("TRLSTACK_TENSOR_PARALLEL_SIZE", "2")
    code, out, _ = run(capsys, "plan", "--gpus", "4", "--format", "json")
    document = json.loads(out)
    assert (document["vllm_port"], document["tensor_parallel_size"]) == (8100, 2)
    code, out, _ = run(capsys, "plan", "--gpus", "4", "--format", "json", "--port", "8200")
    assert json.loads(out)["vllm_port"] == 8200  # the flag wins


def test_plan_writes_a_new_env_file(capsys, tmp_path):
    target = tmp_path / ".env"
    code, out, err = run(capsys, "plan", "--gpus", "4", "--format", "env", "-o", str(target))
    assert code == 0 and out == "" and f"wrote {target}" in err
    assert "SERVE_GPUS=0,1\n" in target.read_text()
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # a new file follows the umask
    assert [path.name for path in tmp_path.iterdir()] == [".env"]  # no temporary file left


def test_plan_output_keeps_the_users_other_settings_and_permissions(capsys, tmp_path):
    target = tmp_path / ".env"
    target.write_text("HF_TOKEN=hf_secret\nSERVE_GPUS=0\nTRAIN_GPUS=1\n")
    target.chmod(0o600)
    code, _, _ = run(capsys, "plan", "--gpus", "8", "--format", "env", "--output", str(target))
    text = target.read_text()
    assert code == 0
    assert text.startswith("HF_TOKEN=hf_secret\n\n# GPU plan")
    assert "SERVE_GPUS=0,1,2,3\n" in text and text.count("SERVE_GPUS") == 1
    assert target.stat().st_mode & 0o777 == 0o600


def test_plan_output_as_json_replaces_the_file(capsys, tmp_path):
    target = tmp_path / "plan.json"
    target.write_text("old")
    assert run(capsys, "plan", "--gpus", "2", "--format", "json", "-o", str(target))[0] == 0
    assert json.loads(target.read_text())["num_processes"] == 1


@pytest.mark.parametrize(
    ("where", "words"),
    [
        ("dir", "is a directory; name a file such as"),
        ("missing/.env", "cannot write"),
        ("file/.env", "cannot write"),
    ],
)
def test_plan_output_to_an_unwritable_place_fails_cleanly(capsys, tmp_path, no_exec, where, words):
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("")
    code, out, err = run(capsys, "plan", "--gpus", "2", "-o", str(tmp_path / where))
    assert code == 1 and words in err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["dir", "file"]


def test_a_failed_plan_leaves_an_existing_env_file_alone(capsys, tmp_path, no_exec):
    target = tmp_path / ".env"
    target.write_text("SERVE_GPUS=0\n")
    code, _, _ = run(capsys, "plan", "--gpus", "2", "--serve", "2", "--format", "env", "-o", str(target))
    assert code == 1 and target.read_text() == "SERVE_GPUS=0\n"


def test_a_new_plan_keeps_the_layout_the_user_chose_or_refuses_naming_both_ways(capsys, tmp_path, no_exec):
    target = tmp_path / ".env"
    target.write_text("TRLSTACK_VARIANT=isolated\nHF_HUB_OFFLINE=1\n")
    assert run(capsys, "plan", "--gpus", "4", "--format", "env", "-o", str(target))[0] == 0
    assert target.read_text().startswith("TRLSTACK_VARIANT=isolated\nHF_HUB_OFFLINE=1\n\n# GPU plan")
    kept = target.read_text()
    # One GPU, where the plan would be colocate: the user's server layout is not dropped.
    code, out, err = run(capsys, "plan", "--gpus", "1", "--format", "env", "-o", str(target))
    assert code == 1 and out == "" and target.read_text() == kept
    assert "TRLSTACK_VARIANT=isolated in the .env runs compose's isolated layout" in err
    fix = ("--share-gpus", "--weight-transfer", "nccl")  # the server beside the trainer, as the message says
    assert f"`trlstack plan {' '.join(fix)} --format env -o .env`" in err
    assert run(capsys, "plan", "--gpus", "1", *fix, "--format", "env", "-o", str(target))[0] == 0
    assert (
        target.read_text().startswith("TRLSTACK_VARIANT=isolated\n")
        and "SHARE_GPUS=1\n" in target.read_text()
    )


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (
            "TRLSTACK_VARIANT=isolate",
            ["TRLSTACK_VARIANT='isolate' in .env names no compose layout", "isolated"],
        ),
        (
            "TRLSTACK_GPU_MEMORY_UTILIZATION=0.5",
            ["would not pass compose's plan check, nothing written: ", "the role's name for GPU_MEMORY_UTIL"],
        ),
    ],
)
def test_a_kept_line_the_plan_check_refuses_stops_the_write_naming_it(capsys, tmp_path, no_exec, line, words):
    target = tmp_path / ".env"
    target.write_text(f"{line}\n")
    code, out, err = run(capsys, "plan", "--gpus", "4", "--format", "env", "-o", str(target))
    assert code == 1 and out == "" and target.read_text() == f"{line}\n"
    assert all(word in err for word in words)
