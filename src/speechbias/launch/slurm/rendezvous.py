"""Can this rank reach its job's DDP master? Checked inside a SLURM job of several tasks before the task runs.

Lightning's ``SLURMEnvironment`` takes the master address from ``MASTER_ADDR`` or else the first node
of the job, and the port from ``MASTER_PORT`` or the job id. A name that does not resolve, or an
address that nothing answers on, would leave every rank retrying its connection to the rendezvous
store until the process-group timeout (30 minutes). :func:`master_problem` says so in one line within
seconds. A short process-group timeout would do it too, but it would also bound every later collective,
and here ranks wait in one while rank zero alone computes the statistics (minutes).
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable

# seconds to wait for the master's TCP answer (a SYN nobody answers; an unknown address in a local
# network fails sooner, with EHOSTUNREACH once ARP gives up)
CONNECT_TIMEOUT_S = 15.0


def master_problem(
    host: str, port: int, connect: Callable = socket.create_connection, timeout_s: float = CONNECT_TIMEOUT_S
) -> str | None:
    """One line when ``host`` does not resolve or does not answer on ``port``, else None. A refused
    connection is an answer (the master's store may not listen yet): only silence or no route fails."""
    where = "MASTER_ADDR or the first node of the job"
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return (
            f"the DDP master address '{host}' ({where}) cannot be resolved ({exc.strerror}): "
            "the job's node names must resolve on every node (DNS or /etc/hosts), or set MASTER_ADDR"
        )
    try:
        connect((host, port), timeout=timeout_s).close()
    except ConnectionRefusedError:
        return None
    except OSError as exc:
        if exc.errno == errno.ECONNREFUSED:
            return None
        why = f"no answer within {timeout_s:.0f} s" if isinstance(exc, TimeoutError) else exc.strerror or exc
        return (
            f"the DDP master address '{host}' ({where}) cannot be reached on port {port} ({why}): "
            "the nodes must reach each other over TCP, or set MASTER_ADDR to an address they share"
        )
    return None


def slurm_master() -> tuple[str, int]:
    """The master address and port Lightning's SLURM environment will use in this job."""
    from lightning_fabric.plugins.environments import SLURMEnvironment

    env = SLURMEnvironment()
    return env.main_address, env.main_port
