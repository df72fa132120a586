"""The DDP master check of a multi-task SLURM job (no cluster needed): a name that does not resolve
and an address that does not answer are one line naming the host; a refused port is an answer."""

from __future__ import annotations

import socket
import time

from speechbias.launch.slurm.rendezvous import master_problem


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once the socket is closed


def test_a_listening_or_refusing_master_is_reachable():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert master_problem("127.0.0.1", server.getsockname()[1]) is None
    # the master's store may not listen yet: refused means the host answered
    assert master_problem("localhost", _closed_port()) is None


def test_a_name_that_does_not_resolve_is_one_line_naming_it():
    started = time.monotonic()
    line = master_problem("no-such-node.invalid", 15001)  # .invalid never resolves (RFC 6761)
    assert time.monotonic() - started < 30
    assert line.startswith("the DDP master address 'no-such-node.invalid' (MASTER_ADDR or the first node of the job)")
    assert "cannot be resolved" in line and "\n" not in line


def test_an_address_that_does_not_answer_is_one_line_naming_it():
    def silent(address, timeout):
        raise TimeoutError("timed out")

    line = master_problem("127.0.0.1", 15001, connect=silent, timeout_s=3)
    assert line.startswith("the DDP master address '127.0.0.1'") and "cannot be reached on port 15001" in line
    assert "no answer within 3 s" in line and "\n" not in line

    def no_route(address, timeout):
        raise OSError(113, "No route to host")

    assert "(No route to host)" in master_problem("127.0.0.1", 15001, connect=no_route)
