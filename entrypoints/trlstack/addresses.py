"""The trainer's address as the vLLM server reaches it, for the NCCL weight-transfer rendezvous.

TRL's client sends vLLM `VLLM_HOST_IP` (through vLLM's get_ip) as the rendezvous master address: the trainer
listens there on the group port and the server's workers dial it. 127.0.0.1 only works when the server runs on
the same machine (or in the same network namespace); for a server elsewhere, the address is the one this
machine sends from to reach the server, which the kernel's routing table gives without sending a packet.

`trainer_host_ip` is the decision (pure: the route and the local-address test are passed in);
`local_address_toward` and `is_local_address` are the side effects, for the defaults and for other launchers
(a Slurm job sets VLLM_HOST_IP the same way). `host_addresses` reads an address or a name in every spelling
(`0`, `::`, `::ffff:0.0.0.0` and a name that resolves to one are all the any-address), for the guards on what
a role binds or dials; `check_bind` is the one guard on what a server binds (serve-vllm's API, the
dashboard).
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.parse
from collections.abc import Callable
from typing import TypeAlias

from trlstack.defaults import LOOPBACK, Env
from trlstack.errors import UsageError

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


def is_loopback(host: str) -> bool:
    """Whether `host` (an IP address or a name, as written) means this machine's loopback."""
    name = host.strip("[]").lower()
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name.split("%")[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def resolved(host: str) -> list[str]:
    """The addresses a host name stands for (a side effect: DNS or /etc/hosts); socket.gaierror when none."""
    return sorted({str(info[4][0]) for info in socket.getaddrinfo(host, None)})


def host_addresses(host: str, resolve: Callable[[str], list[str]] = resolved) -> list[IPAddress]:
    """The addresses `host` stands for, IPv4 where IPv6 maps one (`::ffff:0.0.0.0` is 0.0.0.0); a name
    through `resolve`, whose OSError passes on."""
    try:
        found = [ipaddress.ip_address(host.strip("[]").split("%")[0])]
    except ValueError:
        found = [ipaddress.ip_address(address.split("%")[0]) for address in resolve(host)]
    return [a.ipv4_mapped or a if isinstance(a, ipaddress.IPv6Address) else a for a in found]


def is_any_address(host: str, resolve: Callable[[str], list[str]] = resolved) -> bool:
    """Whether `host` stands for the any-address, in any spelling: bound, it listens on every interface;
    dialled, it reaches only the machine that dials. A name that does not resolve stands for none."""
    try:
        return any(address.is_unspecified for address in host_addresses(host, resolve))
    except OSError:
        return False


def local_address_toward(host: str, port: int) -> str:
    """The address of this machine that the kernel sends from to reach host:port (a UDP connect() picks the
    route; no packet is sent). OSError when the name does not resolve or no route leads there."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
    last: OSError = OSError(f"{host} has no address")
    for family, kind, protocol, _, target in infos:
        with socket.socket(family, kind, protocol) as probe:
            try:
                probe.connect(target)
            except OSError as error:
                last = error
                continue
            address: str = probe.getsockname()[0]
            return address.split("%")[0]
    raise last


def is_local_address(address: str) -> bool:
    """Whether this machine can listen on `address`: an address of one of its interfaces, or a name of one."""
    try:
        infos = socket.getaddrinfo(address, 0, type=socket.SOCK_STREAM)
    except OSError:
        return False
    for family, kind, protocol, _, target in infos:
        with socket.socket(family, kind, protocol) as probe:
            try:
                probe.bind(target)
            except OSError:
                continue
            return True
    return False


def trainer_host_ip(
    server_url: str,
    given: str | None,
    route: Callable[[str, int], str] = local_address_toward,
    is_local: Callable[[str], bool] = is_local_address,
) -> tuple[str, str]:
    """(VLLM_HOST_IP, why) for a trainer whose vLLM server is at `server_url`; `given` is the user's choice.

    A server on loopback gets 127.0.0.1; a server elsewhere, the address this machine reaches it from. A given
    address must be this machine's, and not loopback when the server is elsewhere (its workers would dial
    their own loopback and the rendezvous would wait forever). UsageError naming the fix otherwise.
    """
    parts = urllib.parse.urlsplit(server_url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    flag = f"--host-ip ({Env.VLLM_HOST_IP})"
    if given:
        if is_any_address(given):
            raise UsageError(
                f"{flag} is {given}, the any-address: the server's workers would dial their own machine "
                "for the weight transfer and wait forever. Give the address the server reaches this machine "
                f"at, or leave {flag} unset (train then uses the address this machine reaches {host} from)."
            )
        if is_loopback(given) and not is_loopback(host):
            raise UsageError(
                f"{flag} is {given}, this machine's loopback, but the vLLM server at {server_url} is on "
                f"{host}: its workers would dial their own loopback for the weight transfer and wait "
                f"forever. Leave {flag} unset (train then uses the address this machine reaches {host} "
                "from), or give the address the server reaches this machine at."
            )
        if not is_local(given):
            raise UsageError(
                f"{flag} is {given}, which is not an address of this machine, so the trainer cannot listen "
                "there for the weight transfer. Give an address of this machine that the server reaches "
                f"(`ip -brief address` lists them), or leave {flag} unset."
            )
        return given, f"as given by {flag}"
    if is_loopback(host):
        return LOOPBACK, f"the server at {server_url} is on this machine"
    try:
        address = route(host, port)
    except OSError as error:
        raise UsageError(
            f"no route from this machine to the vLLM server host {host} ({error.strerror or error}); check "
            f"--vllm-url ({Env.VLLM_URL}), or give {flag} the address the server reaches this machine at."
        ) from None
    return address, f"the address this machine reaches {host} from"


def check_bind(
    host: str,
    allow_public: bool,
    refusal: Callable[[str], str],
    private_ok: bool = True,
    resolve: Callable[[str], list[str]] = resolved,
) -> None:
    """Refuse to bind `host` where others could reach it, unless `allow_public`: the any-address in any
    spelling or a public address, and also a private network's address unless `private_ok`. `refusal` says
    why, given what the bind would expose ("every interface", "the public address X"). UsageError."""
    if allow_public:
        return
    try:
        addresses = host_addresses(host, resolve)
    except OSError as error:
        raise UsageError(
            f"--host {host!r} does not resolve ({error.strerror or error}); give an IP address such as "
            f"{LOOPBACK}."
        ) from None
    kept = [a for a in addresses if a.is_loopback or (private_ok and a.is_private and not a.is_unspecified)]
    reached = [a for a in addresses if a not in kept]
    if reached:
        if any(a.is_unspecified for a in reached):
            what = "every interface"
        else:
            what = f"the {'network' if reached[0].is_private else 'public'} address {reached[0]}"
        raise UsageError(refusal(what))
