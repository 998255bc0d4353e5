"""trlstack.addresses: the trainer's address for a server here or on another host, decided from the route, and
the addresses the roles would dial or listen on, checked on this machine's real network stack."""

from __future__ import annotations

import socket

import pytest
from trlstack.addresses import (
    check_bind,
    is_any_address,
    is_local_address,
    is_loopback,
    local_address_toward,
    trainer_host_ip,
)
from trlstack.errors import UsageError

TEST_NET = "192.0.2.1"  # RFC 5737: never an address of a real machine


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "LOCALHOST",
        "vllm.localhost",
        "127.0.0.1",
        "127.3.2.1",
        "::1",
        "[::1]",
        "::ffff:127.0.0.1",
    ],
)
def test_loopback_in_every_spelling(host):
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["vllm", "10.0.0.7", "0.0.0.0", "::", "::ffff:10.0.0.7", "example.org"])
def test_other_hosts_are_not_loopback(host):
    assert not is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "0", "0x0", "::", "[::]", "::ffff:0.0.0.0", "0:0:0:0:0:0:0:0"])
def test_the_any_address_in_every_spelling(host):
    assert is_any_address(host)


def test_a_name_is_the_any_address_when_it_resolves_to_it():
    assert is_any_address("anywhere", resolve=lambda name: ["127.0.0.1", "::ffff:0.0.0.0"])
    assert not is_any_address("vllm", resolve=lambda name: ["10.0.0.7"])


def test_a_name_that_does_not_resolve_stands_for_no_address():
    assert not is_any_address("no-such-host.invalid")


@pytest.mark.parametrize("given", ["0.0.0.0", "::", "::ffff:0.0.0.0"])
def test_the_any_address_is_never_the_trainers_address(given):
    # Dialled by the server's workers, it reaches their own machine: the rendezvous would wait forever.
    with pytest.raises(UsageError, match="the any-address"):
        trainer_host_ip("http://10.0.0.7:8000", given, is_local=lambda address: True)
    with pytest.raises(UsageError, match="the any-address"):
        trainer_host_ip("http://127.0.0.1:8000", given, is_local=lambda address: True)


def no_route(host, port):
    raise AssertionError("a server on loopback needs no route lookup")


def test_a_server_on_this_machine_is_reached_on_loopback():
    assert trainer_host_ip("http://127.0.0.1:8000", None, route=no_route) == (
        "127.0.0.1",
        "the server at http://127.0.0.1:8000 is on this machine",
    )
    assert trainer_host_ip("http://localhost:8000", None, route=no_route)[0] == "127.0.0.1"


def test_a_server_elsewhere_gets_the_routes_source_address():
    seen = []

    def route(host, port):
        seen.append((host, port))
        return "10.0.0.5"

    assert trainer_host_ip("https://vllm.internal", None, route=route) == (
        "10.0.0.5",
        "the address this machine reaches vllm.internal from",
    )
    assert seen == [("vllm.internal", 443)]


def test_the_users_address_is_kept_when_it_is_this_machines():
    assert trainer_host_ip("http://10.0.0.7:8000", "10.0.0.5", is_local=lambda a: True) == (
        "10.0.0.5",
        "as given by --host-ip (VLLM_HOST_IP)",
    )


@pytest.mark.parametrize("given", ["127.0.0.1", "localhost", "::1", "::ffff:127.0.0.1"])
def test_loopback_for_a_server_elsewhere_is_refused_in_every_spelling(given):
    with pytest.raises(UsageError, match="this machine's loopback, but the vLLM server .* is on 10.0.0.7"):
        trainer_host_ip("http://10.0.0.7:8000", given, is_local=lambda a: True)


def test_no_route_to_the_server_names_the_fix():
    def unreachable(host, port):
        raise OSError(101, "Network is unreachable")

    with pytest.raises(
        UsageError, match=r"no route from this machine to the vLLM server host 10.0.0.7 \(Network"
    ):
        trainer_host_ip("http://10.0.0.7:8000", None, route=unreachable)


# This machine's real network stack.


def test_the_route_to_loopback_leaves_from_loopback():
    assert local_address_toward("127.0.0.1", 8000) == "127.0.0.1"


def test_the_route_to_another_host_leaves_from_an_address_of_this_machine():
    try:
        address = local_address_toward(TEST_NET, 8000)  # connect() on UDP only picks the route
    except OSError as error:
        pytest.skip(f"this machine has no route beyond itself ({error})")
    assert not is_loopback(address)
    assert is_local_address(address)
    # A listener on that address is what a server on another host would dial.
    with socket.create_server((address, 0)) as listener:
        assert listener.getsockname()[0] == address


def test_only_this_machines_addresses_are_local():
    assert is_local_address("127.0.0.1")
    assert is_local_address("localhost")
    assert not is_local_address(TEST_NET)
    assert not is_local_address("no-such-host.invalid")


def refused(what: str) -> str:
    return f"would serve on {what}"


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "0", "8.8.8.8"])
def test_the_bind_guard_refuses_what_others_reach_unless_allowed(host):
    with pytest.raises(UsageError, match="would serve on (every interface|the public address 8.8.8.8)"):
        check_bind(host, False, refused)
    check_bind(host, True, refused)


def test_loopback_only_refuses_a_private_network_too():
    check_bind("10.1.2.3", False, refused)  # serve-vllm's guard: another host's trainer must reach it
    with pytest.raises(UsageError, match="would serve on the network address 10.1.2.3"):
        check_bind("10.1.2.3", False, refused, private_ok=False)
    check_bind("127.0.0.1", False, refused, private_ok=False)
    check_bind("::1", False, refused, private_ok=False)
    check_bind("localhost", False, refused, private_ok=False)  # resolved for real


def test_a_name_is_judged_by_every_address_it_resolves_to():
    with pytest.raises(UsageError, match="every interface"):
        check_bind("anywhere", False, refused, resolve=lambda name: ["127.0.0.1", "::ffff:0.0.0.0"])
