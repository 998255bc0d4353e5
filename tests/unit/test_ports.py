"""The ports the roles talk over: one declaration for plan and doctor, and what a local port is doing."""

from __future__ import annotations

import socket

from trlstack.defaults import DEFAULT_GROUP_PORT, DEFAULT_VLLM_PORT
from trlstack.errors import Parser
from trlstack.options import add_settings, settings_from
from trlstack.ports import Ports, free_port, port_problem


def ports(environ, argv):
    parser = Parser(prog="t")
    add_settings(parser, Ports, environ)
    return settings_from(Ports, parser.parse_args(argv))


def test_the_ports_read_the_roles_variables():
    assert ports({}, []) == Ports(DEFAULT_VLLM_PORT, DEFAULT_GROUP_PORT)
    environ = {"TRLSTACK_VLLM_PORT": "8100", "TRLSTACK_VLLM_GROUP_PORT": "52000"}
    assert ports(environ, []) == Ports(8100, 52000)
    assert ports(environ, ["--port", "9000", "--group-port", "9001"]) == Ports(9000, 9001)


def test_port_problem_finds_a_listening_port():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert port_problem(port) is not None
    assert port_problem(port) is None


def test_a_free_port_can_be_listened_on():
    port = free_port()
    assert port_problem(port) is None
    with socket.socket() as server:
        server.bind(("127.0.0.1", port))
