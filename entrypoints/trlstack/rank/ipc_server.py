"""The vLLM server's weight-update endpoints, as a training rank's CUDA-IPC push calls them
(rank/ipc_push.py): which engine the server runs, starting and finishing an update, and one update, its
handles pickled as vLLM's HTTP transport sends them."""

from __future__ import annotations

import base64
import json
import pickle
from collections.abc import Mapping
from typing import Any

from trlstack.transfer import IPC, backend_mismatch


class Server:
    """The vLLM server's weight-update endpoints, as the first rank calls them (HTTP, on loopback). No retries
    and no timeout of its own: an update is not repeated, and the push guard bounds the push."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")

    def _call(self, path: str, payload: Mapping[str, Any] | None = None) -> Any:
        """POST `payload` as JSON (GET without one); the answer's JSON, or RuntimeError naming the answer."""
        import urllib.error
        import urllib.request

        data = None if payload is None else json.dumps(dict(payload)).encode()
        request = urllib.request.Request(f"{self.base_url}{path}", data=data)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
        try:
            with opener.open(request) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            text = error.read().decode(errors="replace")
            raise RuntimeError(
                f"the vLLM server at {self.base_url} answered {path} with {error.code}: {text[-1500:]}"
            ) from None

    def _post(self, path: str, payload: Mapping[str, Any]) -> None:
        self._call(path, payload)

    def backend(self) -> str | None:
        """The server's weight-transfer engine (None: it has none)."""
        try:
            return backend_of(self._call("/server_info?config_format=json"))
        except RuntimeError as error:
            if " with 404:" not in str(error):
                raise
            raise RuntimeError(
                f"the vLLM server at {self.base_url} has no development endpoints (/server_info): start it "
                "with serve-vllm, which sets VLLM_SERVER_DEV_MODE=1"
            ) from None

    def join(self, transfer: str, in_place: bool | None = None) -> None:
        """Check that the server's engine is `transfer`'s; for IPC, initialise it. `in_place` False: ask
        trlstack's engine for vLLM's layerwise reload instead of loading in place (bench/gpu_push.py
        compares them; vLLM's own engine takes no such word). None: the engine's default."""
        check_backend(self.backend(), transfer, self.base_url)
        if transfer == IPC:
            init = {} if in_place is None else {"in_place": in_place}
            self._post("/init_weight_transfer_engine", {"init_info": init})

    def start(self) -> None:
        self._post("/start_weight_update", {})

    def load(self, update: Mapping[str, Any]) -> None:
        """Hand the server one update (names, shapes, dtypes and the pickled handles); it answers once its
        workers have loaded the weights from this GPU's memory."""
        self._post("/update_weights", {"update_info": update})

    def finish(self) -> None:
        self._post("/finish_weight_update", {})


def backend_of(server_info: Mapping[str, Any]) -> str | None:
    """The weight-transfer backend in /server_info's answer (None: no engine)."""
    config = server_info.get("vllm_config", {}).get("weight_transfer_config")
    return config.get("backend") if isinstance(config, Mapping) else None


def check_backend(backend: str | None, transfer: str, url: str) -> None:
    """RuntimeError naming the fix where the server's engine is not the one this trainer pushes through."""
    problem = backend_mismatch(backend, transfer, url)
    if problem is not None:
        raise RuntimeError(problem)


def http_update(info: Any) -> dict[str, Any]:
    """vLLM's IPCWeightTransferUpdateInfo as its HTTP transport sends it: the handles pickled, base64."""
    update: dict[str, Any] = {
        "names": info.names,
        "dtype_names": info.dtype_names,
        "shapes": info.shapes,
        "packed": info.packed,
    }
    if info.tensor_sizes is not None:
        update["tensor_sizes"] = info.tensor_sizes
    update["ipc_handles_pickled"] = base64.b64encode(pickle.dumps(info.ipc_handles)).decode("ascii")
    return update
