"""A stand-in for the Hugging Face Hub's kernel repositories, for the image tests of the Kernels Hub cache:
the answers `kernels lock` and `kernels download` (kernels 0.16, huggingface_hub 1.x) ask the Hub for, over
HTTP.

Standard library only: it runs in a container of the image (`python kernel_hub.py ROOT PORT [HOST]`), on
Docker's default bridge network, where the image build's RUN steps reach it
(HF_ENDPOINT=http://ITS-ADDRESS:PORT).

A repository is a folder ROOT/ORG/NAME holding branches.json ({"v3": COMMIT, ...}) and one folder per commit
(40 hex digits) with the files of that commit. Files ending in .so are served as Git LFS files (their id the
sha256 of their bytes), the rest as plain Git blobs (their id the blob's sha1), as the Hub serves a kernel's
shared libraries and its Python files.

Endpoints (repo type "kernel", so the paths say "kernels"):
  GET  /api/kernels/ORG/NAME/refs                         the branches (a kernel's versions are branches vN)
  GET  /api/kernels/ORG/NAME[/revision/REV]               repo info: the commit REV (default main) names
  GET  /api/kernels/ORG/NAME/tree/REV[/PATH]?recursive=   files and folders under PATH
  HEAD|GET /kernels/ORG/NAME/resolve/REV/PATH             a file, with the Hub's commit and ETag headers
Anything else is a 404 with the Hub's X-Error-Code, as the client expects (e.g. kernel-status.toml, which
`kernels` asks for and most repositories lack). Each request is logged to stderr."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

COMMIT = re.compile(r"[0-9a-f]{40}")


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def is_lfs(path: str) -> bool:
    return path.endswith(".so")


class Repo:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.branches: dict[str, str] = json.loads((folder / "branches.json").read_text())

    def commit(self, revision: str) -> str | None:
        sha = self.branches.get(revision, revision)
        return sha if COMMIT.fullmatch(sha) and (self.folder / sha).is_dir() else None

    def entry(self, sha: str, path: str) -> dict:
        """The tree API's entry for the file or folder `path` of commit `sha`."""
        file = self.folder / sha / path
        if file.is_dir():
            return {
                "type": "directory",
                "oid": hashlib.sha1(path.encode()).hexdigest(),
                "size": 0,
                "path": path,
            }
        data = file.read_bytes()
        entry = {"type": "file", "oid": git_blob_id(data), "size": len(data), "path": path}
        if is_lfs(path):
            entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 130}
        return entry

    def tree(self, sha: str, under: str, recursive: bool) -> list[dict] | None:
        base = self.folder / sha / under
        if not base.is_dir():
            return None
        found = base.rglob("*") if recursive else base.iterdir()
        paths = sorted(str(p.relative_to(self.folder / sha)) for p in found)
        return [self.entry(sha, path) for path in paths]


class Handler(BaseHTTPRequestHandler):
    root: Path

    def repo(self, org: str, name: str) -> Repo | None:
        folder = self.root / org / name
        return Repo(folder) if (folder / "branches.json").is_file() else None

    def answer(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in {"Content-Length": str(len(body)), **(headers or {})}.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def missing(self, code: str) -> None:
        self.answer(404, json.dumps({"error": code}).encode(), {"X-Error-Code": code})

    def send_json(self, value: object) -> None:
        self.answer(200, json.dumps(value).encode(), {"Content-Type": "application/json"})

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        parts = [unquote(p) for p in url.path.split("/") if p]
        query = parse_qs(url.query)
        if parts[:2] == ["api", "kernels"] and len(parts) >= 4:
            self.api(parts[2], parts[3], parts[4:], query)
        elif parts[:1] == ["kernels"] and len(parts) >= 6 and parts[3] == "resolve":
            self.resolve(parts[1], parts[2], parts[4], "/".join(parts[5:]))
        else:
            self.missing("RepoNotFound")

    def api(self, org: str, name: str, rest: list[str], query: dict[str, list[str]]) -> None:
        repo = self.repo(org, name)
        if repo is None:
            return self.missing("RepoNotFound")
        if rest == ["refs"]:
            branches = [
                {"name": b, "ref": f"refs/heads/{b}", "targetCommit": sha} for b, sha in repo.branches.items()
            ]
            return self.send_json({"branches": branches, "tags": [], "converts": []})
        revision = rest[1] if len(rest) >= 2 and rest[0] in ("revision", "tree") else "main"
        sha = repo.commit(revision)
        if sha is None:
            return self.missing("RevisionNotFound")
        if rest in ([], ["revision", revision]):
            files = repo.tree(sha, "", recursive=True) or []
            siblings = [{"rfilename": e["path"]} for e in files if e["type"] == "file"]
            return self.send_json({"id": f"{org}/{name}", "sha": sha, "private": False, "siblings": siblings})
        if rest[0] == "tree":
            recursive = query.get("recursive", ["false"])[0].lower() == "true"
            entries = repo.tree(sha, "/".join(rest[2:]), recursive)
            return self.missing("EntryNotFound") if entries is None else self.send_json(entries)
        self.missing("RepoNotFound")

    def resolve(self, org: str, name: str, revision: str, path: str) -> None:
        repo = self.repo(org, name)
        if repo is None:
            return self.missing("RepoNotFound")
        sha = repo.commit(revision)
        if sha is None:
            return self.missing("RevisionNotFound")
        file = repo.folder / sha / path
        if not file.is_file():
            return self.missing("EntryNotFound")
        data = file.read_bytes()
        entry = repo.entry(sha, path)
        etag = entry["lfs"]["oid"] if "lfs" in entry else entry["oid"]
        self.answer(200, data, {"X-Repo-Commit": sha, "ETag": f'"{etag}"'})

    def log_message(self, format: str, *args: object) -> None:
        print(f"kernel hub: {format % args}", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    root, port = Path(argv[0]), int(argv[1])
    host = argv[2] if len(argv) > 2 else "0.0.0.0"  # every address of its container, which publishes no port
    Handler.root = root
    server = ThreadingHTTPServer((host, port), Handler)
    print(f"kernel hub: serving {root} on port {port}", file=sys.stderr, flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
