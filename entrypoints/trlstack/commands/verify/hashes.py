"""The hashes verify compares, spelled as each source spells them: hex (uv.lock, the SBOM), RECORD's
base64, and the source hash a .pyc holds."""

from __future__ import annotations

import base64
import hashlib

CHUNK = 1 << 20  # files are hashed a MiB at a time: the venv holds files of several GB


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record_hash(hex_digest: str) -> str:
    """A sha256 as RECORD files spell it: sha256=<urlsafe base64, unpadded>."""
    return "sha256=" + base64.urlsafe_b64encode(bytes.fromhex(hex_digest)).rstrip(b"=").decode()


def source_hash(data: bytes) -> bytes:
    """The hash a hash-based .pyc holds for its source (PEP 552), as importlib computes it."""
    import importlib.util

    return importlib.util.source_hash(data)
