"""`trlstack dashboard OUTPUT_DIR`: a run's metrics, live in a browser, served by trackio's dashboard on
127.0.0.1 (loopback only unless --allow-public-bind, the guard serve-vllm's bind has, stricter: not even a
private network's address, since a person reaches it through an SSH tunnel and nothing else needs it).

OUTPUT_DIR is a run's output folder (it holds trackio/, which train writes: run/tracking.py), served as it
is; or a folder of them, such as compose's outputs/, where each run appears as a project named after its
folder as soon as it has logged (a view of links to their databases, renewed every few seconds). trackio
imports a run's network-filesystem fragments (trlstack/metrics.py) when the run's own folder is served.

trackio is the gpu extra's (the image has it); from a checkout `uv run --extra dashboard trlstack dashboard
OUTPUT_DIR` serves a copied folder. Ctrl-C or SIGTERM stops it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import signal
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from trlstack import addresses
from trlstack.defaults import DEFAULT_DASHBOARD_PORT, LOOPBACK, Env
from trlstack.errors import UsageError
from trlstack.metrics import find_stores, metrics_dir
from trlstack.option_types import port_number
from trlstack.options import add_settings, flag, setting, settings_from, switch

X_AXIS = "train/global_step"  # the trainer's step, which transformers' callback logs with every row
# The order of the plots: the rewards and the loss first, then where the time goes, then the machine.
PLOT_ORDER = (
    "train/reward,train/rewards/*,train/loss,train/kl,train/completions/*,train/time/*,train/throughput/*,"
    "train/memory/*,train/server/*"
)
RENEW_S = 2.0  # how often a folder of runs is looked at again for new runs


@dataclass(frozen=True)
class DashboardSettings:
    output_dir: str = flag(
        "a run's output folder (holding trackio/), or a folder of them (compose's outputs/)",
        positional=True,
        metavar="OUTPUT_DIR",
    )
    host: str = setting(Env.DASHBOARD_HOST, "address to serve on", LOOPBACK)
    port: int = setting(Env.DASHBOARD_PORT, "port to serve on", DEFAULT_DASHBOARD_PORT, port_number)
    allow_public_bind: bool = switch(
        Env.DASHBOARD_ALLOW_PUBLIC_BIND,
        "allow an address beyond loopback (the dashboard has no authentication and shows every metric)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_settings(parser, DashboardSettings, os.environ)


def check_bind(host: str, allow_public: bool) -> None:
    """Loopback only, unless `allow_public`: the guard serve-vllm's bind has (trlstack.addresses)."""

    def refusal(what: str) -> str:
        return (
            f"--host {host} serves the dashboard on {what}; it has no authentication and shows every metric "
            f"of the run. Serve it on {LOOPBACK} and reach it through an SSH tunnel (`ssh -N -L "
            "PORT:127.0.0.1:PORT HOST`), or pass --allow-public-bind "
            f"({Env.DASHBOARD_ALLOW_PUBLIC_BIND}=1) only where a firewall or an unpublished container "
            "network keeps others out."
        )

    addresses.check_bind(host, allow_public, refusal, private_ok=False)


def check_port(host: str, port: int) -> None:
    """UsageError naming the fix when host:port is taken (trackio would only say it found no empty port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        try:
            probe.bind((host.strip("[]"), port))
        except OSError as error:
            raise UsageError(
                f"cannot serve the dashboard on {host}:{port} ({error.strerror or error}); pass another "
                f"--port ({Env.DASHBOARD_PORT})."
            ) from None


def project_name(folder_name: str) -> str:
    """A run's project in a view: its folder's name in the characters trackio keeps in a file name."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", folder_name) or "run"


def link_runs(folder: Path, view: Path) -> list[str]:
    """Link into `view` the database (and its lock) of every run under `folder` not linked yet; the names of
    the runs linked now. Idempotent: called again as runs appear."""
    linked = []
    for store in find_stores(folder):
        if store.database is None:
            continue
        name = project_name(store.name)
        link = view / f"{name}.db"
        if link.is_symlink():
            continue
        (view / f"{name}.lock").symlink_to(store.database.with_suffix(".lock").resolve())
        link.symlink_to(store.database.resolve())  # SQLite keeps its journal beside the file linked to
        linked.append(store.name)
    return linked


def the_project(trackio_dir: Path) -> str | None:
    """The one project in a run's trackio folder (None: none yet, or several: the dashboard lists them)."""
    databases = sorted(trackio_dir.glob("*.db"))
    return databases[0].stem if len(databases) == 1 else None


def serve(trackio_dir: Path, project: str | None, settings: DashboardSettings) -> str:
    """Start trackio's dashboard on trackio_dir in this process's threads; its URL."""
    os.environ[Env.TRACKIO_DIR] = str(trackio_dir)  # trackio reads it when imported
    os.environ.setdefault("TRACKIO_PLOT_ORDER", PLOT_ORDER)
    try:
        import trackio
    except ModuleNotFoundError as error:
        raise UsageError(
            f"`trlstack dashboard` needs trackio ({error.name} is missing): use the image, or from a "
            "checkout `uv run --extra dashboard trlstack dashboard OUTPUT_DIR`."
        ) from None
    with contextlib.redirect_stdout(io.StringIO()):  # its banner prints a write token; ours says where
        trackio.show(
            project=project,
            host=settings.host,
            server_port=settings.port,
            open_browser=False,
            block_thread=False,
        )
    shown = LOOPBACK if addresses.is_any_address(settings.host) else settings.host
    shown = f"[{shown}]" if ":" in shown else shown
    query = f"?project={project}&x_axis={X_AXIS}" if project else f"?x_axis={X_AXIS}"
    return f"http://{shown}:{settings.port}/{query}"


def stop(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def run(args: argparse.Namespace) -> int:
    settings = settings_from(DashboardSettings, args)
    folder = Path(settings.output_dir)
    if not folder.is_dir():
        raise UsageError(
            f"{folder} is not a folder; give the output folder of a run (train's --output-dir, "
            "compose's outputs/METHOD), or a folder of them."
        )
    check_bind(settings.host, settings.allow_public_bind)
    check_port(settings.host, settings.port)
    signal.signal(signal.SIGTERM, stop)
    single = metrics_dir(folder).is_dir()
    with tempfile.TemporaryDirectory(prefix="trlstack-dashboard-") as scratch:
        view = metrics_dir(folder) if single else Path(scratch)
        linked = [] if single else link_runs(folder, view)
        url = serve(view, the_project(view) if single else None, settings)
        what = f"the run in {folder}" if single else f"the runs in {folder} ({len(linked)} so far)"
        print(f"trlstack dashboard: {what} at {url} (Ctrl-C stops it)", flush=True)
        while True:
            time.sleep(RENEW_S)
            for name in [] if single else link_runs(folder, view):
                print(f"trlstack dashboard: run {name} added (project {project_name(name)})", flush=True)
