"""Fail the image build when the versions its labels announce differ from uv.lock or the venv."""

import argparse
import hashlib
import importlib.metadata
import platform
import sys
import tomllib


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lock", required=True, help="path of uv.lock")
    parser.add_argument("--lock-sha256", required=True, help="sha256 the uv-lock label announces")
    parser.add_argument("--python", required=True, help="Python version the label announces (major.minor)")
    parser.add_argument("--package", action="append", default=[], help="NAME==VERSION a label announces")
    args = parser.parse_args()

    with open(args.lock, "rb") as f:
        raw = f.read()
    locked = {p["name"]: p["version"] for p in tomllib.loads(raw.decode())["package"] if "version" in p}

    errors = []
    digest = hashlib.sha256(raw).hexdigest()
    if args.lock_sha256 != digest:
        errors.append(f"UV_LOCK_SHA256={args.lock_sha256!r} but uv.lock hashes to {digest}")
    running = ".".join(platform.python_version_tuple()[:2])
    if args.python != running:
        errors.append(f"PYTHON_VERSION={args.python!r} but the venv runs Python {running}")
    for spec in args.package:
        name, _, announced = spec.partition("==")
        installed = importlib.metadata.version(name)
        if not announced or announced != locked.get(name) or announced != installed:
            errors.append(
                f"{name}: label {announced!r}, uv.lock {locked.get(name)!r}, installed {installed!r}"
            )

    for error in errors:
        print(
            f"check-labels: {error}; set the bake variables from uv.lock (see docker/README.md)",
            file=sys.stderr,
        )
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
