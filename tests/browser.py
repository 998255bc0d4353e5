"""A real headless browser for the tests that look at a page as a person would: Debian's Chromium (CI installs
it: scripts/chromium.sh), never a browser downloaded by a test tool. Without it those tests skip and say why;
with CI=true they fail instead, as the Docker tests do (tests/conftest.py)."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

PROVISION_FIX = "run `bash scripts/chromium.sh` as root (Debian's chromium package)"
# The page is a client-side app: it fetches its data after loading, so the browser is given this much virtual
# time (timers and network run on) before the DOM or the screenshot is taken.
SETTLE_MS = 15000


def chromium() -> str:
    """The browser's command, or skip (fail under CI) naming how to install it."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI") == "true":
        pytest.fail(f"no chromium on PATH; CI provisions it, so this is an error: {PROVISION_FIX}")
    pytest.skip(f"no chromium on PATH; {PROVISION_FIX}")


def headless(browser: str, url: str, *options: str) -> subprocess.CompletedProcess[str]:
    argv = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run"]
    argv += [f"--virtual-time-budget={SETTLE_MS}", *options, url]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def dom(browser: str, url: str) -> str:
    """The page's DOM once its scripts have run."""
    done = headless(browser, url, "--window-size=1400,900", "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def screenshot(browser: str, url: str, path: Path, size: str = "900,600") -> Path:
    done = headless(browser, url, f"--window-size={size}", f"--screenshot={path}")
    assert done.returncode == 0 and path.is_file(), done.stderr[-2000:]
    return path


def pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit, non-interlaced PNG such as Chromium writes."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    at, chunks, header = 8, [], b""
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        header = body if kind == b"IHDR" else header
        chunks += [body] if kind == b"IDAT" else []
        at += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, "an 8-bit RGB(A) PNG"
    size = 3 if colour == 2 else 4
    raw, stride, rows, previous = zlib.decompress(b"".join(chunks)), width * size, [], bytes(width * size)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - size] if x >= size else 0
            up, corner = previous[x], previous[x - size] if x >= size else 0
            if kind == 1:
                line[x] = (line[x] + left) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + up) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                guess = left + up - corner
                nearest = min(
                    (abs(guess - left), 0, left), (abs(guess - up), 1, up), (abs(guess - corner), 2, corner)
                )
                line[x] = (line[x] + nearest[2]) & 0xFF
        rows.append(bytes(line))
        previous = bytes(line)
    return width, size, rows


def coloured_columns(path: Path) -> set[int]:
    """The x of every column holding a coloured pixel (not white, grey or black): where something was drawn
    in colour, such as a plotted series, on a page of greys."""
    width, size, rows = pixels(path)
    found = set()
    for row in rows:
        for x in range(width):
            r, g, b = row[x * size : x * size + 3]
            if max(r, g, b) - min(r, g, b) > 40:
                found.add(x)
    return found
