"""The TCP sockets in LISTEN state and the processes that own them, read from /proc as `ss -ltnp` reads them
(images and CI machines need not have iproute2). Run as a script it prints them as JSON lines."""

from __future__ import annotations

import json
import os
import socket
import struct
from dataclasses import asdict, dataclass

LISTEN = "0A"  # the kernel's TCP_LISTEN state in /proc/net/tcp{,6}


@dataclass(frozen=True)
class Listener:
    address: str  # as the socket is bound: 127.0.0.1, 0.0.0.0, ::, ...
    port: int
    pid: int | None  # None: no process this one can see owns it
    command: str


def _address(hexadecimal: str, ipv6: bool) -> tuple[str, int]:
    host, port = hexadecimal.split(":")
    raw = bytes.fromhex(host)
    if ipv6:  # four 32-bit words, each in host (little-endian) order
        raw = b"".join(struct.pack("<I", word) for word in struct.unpack(">4I", raw))
        return socket.inet_ntop(socket.AF_INET6, raw), int(port, 16)
    return socket.inet_ntop(socket.AF_INET, struct.pack("<I", int(host, 16))), int(port, 16)


def _socket_owners() -> dict[str, tuple[int, str]]:
    owners = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as stream:
                command = stream.read().replace(b"\0", b" ").decode(errors="replace").strip()
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    owners[target[len("socket:[") : -1]] = (int(pid), command)
        except OSError:
            continue  # gone, or not ours to read
    return owners


def listening() -> list[Listener]:
    owners = _socket_owners()
    found = []
    for table, ipv6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        with open(table) as stream:
            for line in stream.read().splitlines()[1:]:
                fields = line.split()
                if fields[3] != LISTEN:
                    continue
                address, port = _address(fields[1], ipv6)
                pid, command = owners.get(fields[9], (None, ""))
                found.append(Listener(address, port, pid, command))
    return found


if __name__ == "__main__":
    for listener in listening():
        print(json.dumps(asdict(listener)))
