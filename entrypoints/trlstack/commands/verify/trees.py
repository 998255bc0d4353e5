"""The file systems verify reads: a folder (`/` inside a container, an unpacked image) or a `docker save` or
OCI archive, read as a stream. Both answer the same questions, so every check runs on either."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import posixpath
import re
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from trlstack.commands.verify.hashes import CHUNK, source_hash
from trlstack.commands.verify.layout import DPKG_STATUS, PROVENANCE


class DirTree:
    """An image's file system as a folder: `/` inside a container, or an unpacked image."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def _path(self, path: str) -> Path:
        return self.root / path

    def read(self, path: str) -> bytes | None:
        try:
            return self._path(path).read_bytes()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None

    def is_file(self, path: str) -> bool:
        full = self._path(path)
        return full.is_file() and not full.is_symlink()

    def sha256(self, path: str) -> str | None:
        digest = hashlib.sha256()
        try:
            with self._path(path).open("rb") as stream:
                while chunk := stream.read(CHUNK):
                    digest.update(chunk)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        return digest.hexdigest()

    def head(self, path: str, size: int) -> bytes:
        with self._path(path).open("rb") as stream:
            return stream.read(size)

    def source_hash(self, path: str) -> bytes | None:
        data = self.read(path)
        return None if data is None else source_hash(data)

    def files(self, prefix: str) -> Iterator[str]:
        """Regular files under prefix (symlinks are not files here), as paths relative to the root."""
        top = self._path(prefix)
        for folder, _, names in os.walk(top):
            for name in names:
                full = Path(folder) / name
                if full.is_file() and not full.is_symlink():
                    yield full.relative_to(self.root).as_posix()

    @property
    def local_root(self) -> Path:
        return self.root


@dataclass
class _Entry:
    sha256: str
    size: int
    data: bytes | None = None  # kept for the small files verify reads whole
    head: bytes = b""  # first 16 bytes (a .pyc header)
    source_hash: bytes | None = None  # for .py files


@dataclass
class TarTree:
    """An image's file system read from a `docker save` or OCI archive: its layers in order, whiteouts
    applied. Files are hashed as they stream past; only the small files verify reads whole are kept."""

    entries: dict[str, _Entry] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def keeps(path: str) -> bool:
        return (
            path.startswith(PROVENANCE + "/")
            or path == DPKG_STATUS
            or bool(re.search(r"\.dist-info/(METADATA|RECORD|WHEEL)$", path))
        )

    @classmethod
    def load(cls, archive: str | Path) -> TarTree:
        tree = cls()
        with tarfile.open(archive) as outer:
            members = {m.name.lstrip("./"): m for m in outer.getmembers()}

            def blob(name: str) -> bytes:
                member = members.get(name.lstrip("./"))
                if member is None:
                    raise ValueError(f"{archive}: no {name} in the archive")
                return outer.extractfile(member).read()  # type: ignore[union-attr]

            if "manifest.json" in members:  # docker save (also written next to the OCI layout)
                manifest = json.loads(blob("manifest.json"))[0]
                config = json.loads(blob(manifest["Config"]))
                layers = manifest["Layers"]
            else:  # OCI image layout: index -> manifest -> config and layers
                index = json.loads(blob("index.json"))
                digest = index["manifests"][0]["digest"].replace(":", "/")
                manifest = json.loads(blob(f"blobs/{digest}"))
                if "manifests" in manifest:
                    digest = manifest["manifests"][0]["digest"].replace(":", "/")
                    manifest = json.loads(blob(f"blobs/{digest}"))
                config = json.loads(blob(f"blobs/{manifest['config']['digest'].replace(':', '/')}"))
                layers = [f"blobs/{layer['digest'].replace(':', '/')}" for layer in manifest["layers"]]
            tree.labels = (config.get("config") or {}).get("Labels") or {}
            for layer in layers:
                member = members[layer.lstrip("./")]
                with outer.extractfile(member) as raw:  # type: ignore[union-attr]
                    tree._apply(raw)
        return tree

    def _apply(self, raw: IO[bytes]) -> None:
        magic = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
        stream = gzip.GzipFile(fileobj=raw) if magic == b"\x1f\x8b" else raw
        with tarfile.open(fileobj=stream, mode="r|") as layer:
            for member in layer:
                path = posixpath.normpath(member.name.lstrip("/")).removeprefix("./")
                folder, name = posixpath.split(path)
                if name == ".wh..wh..opq":
                    self._drop(folder, keep_folder=True)
                    continue
                if name.startswith(".wh."):
                    self._drop(posixpath.join(folder, name[4:]))
                    continue
                self.entries.pop(path, None)
                if member.isfile():
                    self.entries[path] = self._read(path, layer.extractfile(member))  # type: ignore[arg-type]
                elif member.islnk():
                    target = posixpath.normpath(member.linkname.lstrip("/")).removeprefix("./")
                    if target in self.entries:
                        self.entries[path] = self.entries[target]

    def _read(self, path: str, stream: io.BufferedReader) -> _Entry:
        digest, size, head, kept = hashlib.sha256(), 0, b"", []
        keep = self.keeps(path) or path.endswith(".py")
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
            if size == 0:
                head = chunk[:16]
            size += len(chunk)
            if keep:
                kept.append(chunk)
        data = b"".join(kept) if keep else None
        entry = _Entry(digest.hexdigest(), size, head=head)
        if path.endswith(".py"):
            entry.source_hash = source_hash(data or b"")
            data = None
        elif keep:
            entry.data = data
        return entry

    def _drop(self, path: str, keep_folder: bool = False) -> None:
        for name in [n for n in self.entries if n == path or n.startswith(path + "/")]:
            if keep_folder and name == path:
                continue
            del self.entries[name]

    def read(self, path: str) -> bytes | None:
        entry = self.entries.get(path)
        return None if entry is None else entry.data

    def is_file(self, path: str) -> bool:
        return path in self.entries

    def sha256(self, path: str) -> str | None:
        entry = self.entries.get(path)
        return None if entry is None else entry.sha256

    def head(self, path: str, size: int) -> bytes:
        return self.entries[path].head[:size]

    def source_hash(self, path: str) -> bytes | None:
        entry = self.entries.get(path)
        return None if entry is None else entry.source_hash

    def files(self, prefix: str) -> Iterator[str]:
        yield from (name for name in self.entries if name.startswith(prefix.rstrip("/") + "/"))

    local_root = None


Tree = DirTree | TarTree  # an image's file system, whichever way it is read
