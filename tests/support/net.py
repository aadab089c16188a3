"""Free TCP ports on 127.0.0.1."""

from __future__ import annotations

import socket
from contextlib import ExitStack


def free_ports(count: int) -> list[int]:
    """Distinct free TCP ports on 127.0.0.1 (held together while chosen, then released).

    Nothing listens on them when this returns: use one for a server to start, or as
    an address where a connection is refused.
    """
    with ExitStack() as stack:
        ports: list[int] = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def free_port() -> int:
    """One free TCP port on 127.0.0.1 (see `free_ports`)."""
    [port] = free_ports(1)
    return port
