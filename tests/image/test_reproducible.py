"""Two builds of one commit give one image: the image rebuilt without the layer cache has the same image ID
(the sha256 of its config, which names every layer by the sha256 of its content). uv checks every wheel
against uv.lock's hashes either way; whether its download cache is warm for the rebuild is the engine's call
(warm on a developer's machine; in CI's runs every wheel was downloaded again), and a warm cache, which
changes the order uv installs wheels in, must not change the image either.
bench/reproducible.py does the full check (two builds from clean caches, layer by layer).
The engine (Docker 26, overlay2 graph driver) keeps the rebuild's own copy of each layer it already held,
the venv's 7 GB among them: `docker builder prune` drops the copy's cache record and leaves its files on disk
(seen in every run, whatever the order of `docker image rm` and the prune). So this test runs after every
other (the `rebuild` mark, tests/conftest.py): the .sif conversion, the run's peak, comes before the copy.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from reproducible import compare_layers, layer_manifests  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.rebuild]


def image_id_and_layers(tag: str) -> tuple[str, list[str]]:
    done = subprocess.run(["docker", "image", "inspect", tag], capture_output=True, text=True, check=True)
    image = json.loads(done.stdout)[0]
    return image["Id"], image["RootFS"]["Layers"]


def test_a_rebuild_without_cache_is_the_same_image(
    trlstack_image: str, image_builder: Callable[..., None], tmp_path: Path
) -> None:
    rebuild = f"{trlstack_image}-rebuild"
    try:
        image_builder(rebuild, tmp_path / "rebuild.log", "--no-cache")
        (first, first_layers), (second, second_layers) = map(image_id_and_layers, (trlstack_image, rebuild))
        print(f"build 1 {first}\nbuild 2 {second}")
        if first != second:
            differing = [
                i for i, (a, b) in enumerate(zip(first_layers, second_layers, strict=False)) if a != b
            ]
            report = compare_layers(layer_manifests(trlstack_image), layer_manifests(rebuild), differing)
            pytest.fail(f"the rebuild differs, file by file:\n{report[:6000]}")
    finally:
        subprocess.run(["docker", "image", "rm", rebuild], capture_output=True)
