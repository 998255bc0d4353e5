"""The Hugging Face token reaches huggingface_hub in both roles through the compose secret, never through the
environment; without a token file the roles download anonymously."""

from __future__ import annotations

import os

import pytest
from stacks import COMPOSE_FILE, SMOKE_FILE

pytestmark = pytest.mark.docker

READ_TOKEN = "import os, huggingface_hub; print(repr(huggingface_hub.get_token()), 'HF_TOKEN' in os.environ)"


@pytest.mark.parametrize("service", ["vllm", "grpo"])
def test_token_file_is_the_hubs_token(project, trlstack_image, tmp_path, service):
    token = tmp_path / "hf_token"
    token.write_text("hf_exampleTokenForTheSecret\n")
    token.chmod(0o600)
    if os.geteuid() == 0:
        os.chown(
            token, 1000, 1000
        )  # the owner is the containers' user, as on a machine where you are uid 1000
    compose = project(
        files=(COMPOSE_FILE, SMOKE_FILE),
        TRLSTACK_IMAGE=trlstack_image,
        TRLSTACK_OUTPUTS=str(tmp_path),
        HF_TOKEN_FILE=str(token),
    )
    done = compose.run("run", "--rm", "--no-deps", service, "python", "-c", READ_TOKEN, timeout=300)
    assert done.stdout.split() == ["'hf_exampleTokenForTheSecret'", "False"], done.stdout + done.stderr


def test_without_a_token_file_downloads_are_anonymous(project, trlstack_image, tmp_path):
    compose = project(
        files=(COMPOSE_FILE, SMOKE_FILE), TRLSTACK_IMAGE=trlstack_image, TRLSTACK_OUTPUTS=str(tmp_path)
    )
    done = compose.run("run", "--rm", "--no-deps", "grpo", "python", "-c", READ_TOKEN, timeout=300)
    assert done.stdout.split() == ["None", "False"], done.stdout + done.stderr
