"""Free TCP ports on 127.0.0.1, chosen below the ports the kernel hands to outgoing
connections.

A port chosen free can be taken before its server binds it. Tests start their servers one
after another (a replica, then the next, then the load balancer), and each outgoing
connection made meanwhile (a replica exporting to Jaeger) gets a port from the kernel's
ephemeral range: a port chosen in that range could go to it ("bind: address already in
use", seen once in a full run). Below the range only an explicit bind takes a port.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Container
from contextlib import ExitStack
from pathlib import Path

_LOWEST = 20_000
"""The lowest port chosen: above the well-known and registered ports services default to."""
_ATTEMPTS = 200


class NoFreePorts(RuntimeError):
    """No free ports found where they were looked for."""


def _ephemeral_low(default: int = 32_768) -> int:
    """The lowest port of the kernel's range for outgoing connections (Linux: 32768)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def _span(size: int) -> tuple[int, int]:
    """Where blocks of ``size`` ports are looked for: below the ephemeral range, or, when
    that range starts too low to leave room, up to 60000 as before."""
    top = _ephemeral_low()
    if top - size <= _LOWEST + size:
        top = 60_000
    return _LOWEST, top - size


def free_block(size: int, attempts: int = 50) -> int:
    """A base port with ``size`` consecutive free ports on 127.0.0.1."""
    rng = random.Random()
    low, high = _span(size)
    for _ in range(attempts):
        base = rng.randrange(low, high)
        with ExitStack() as stack:
            try:
                for port in range(base, base + size):
                    sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                    sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return base
    raise NoFreePorts(f"no {size} consecutive free ports found in {attempts} attempts")


def free_ports(count: int, avoid: Container[int] = ()) -> list[int]:
    """Distinct free TCP ports on 127.0.0.1 (held together while chosen, then released).

    Nothing listens on them when this returns: use one for a server to start, or as
    an address where a connection is refused. ``avoid``: ports chosen before and not yet
    bound (a `free_block`), which are free too, and must not be chosen again.
    """
    rng = random.Random()
    low, high = _span(1)
    with ExitStack() as stack:
        ports: list[int] = []
        for _ in range(_ATTEMPTS):
            if len(ports) == count:
                break
            port = rng.randrange(low, high)
            if port in ports or port in avoid:
                continue
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            ports.append(port)
        if len(ports) < count:
            raise NoFreePorts(f"{count} free ports wanted, {len(ports)} found")
        return ports


def free_port() -> int:
    """One free TCP port on 127.0.0.1 (see `free_ports`)."""
    [port] = free_ports(1)
    return port
