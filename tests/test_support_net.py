"""The free-port helpers of the integration tests: a port chosen for one server is never
chosen again for another before both have bound theirs."""

from __future__ import annotations

import pytest

from support import free_block, free_ports, net


def test_free_ports_never_picks_a_port_of_the_block_chosen_before_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = free_block(30)  # thirty consecutive ports, all free now, released
    monkeypatch.setattr(net, "_span", lambda size: (base, base + 30))
    monkeypatch.setattr(net, "_ATTEMPTS", 5_000)  # every port of the 30 drawn, near surely
    chosen = free_ports(10, avoid=range(base, base + 20))
    assert sorted(chosen) == list(range(base + 20, base + 30))
