"""Stragglers by host at the edges of their test (issue 36, ``.ci/mutants/nsys.toml``).

The ring of ``test_nsys_nccl_hosts.py`` has one host 17-20 ms behind the other with ranks 2.3 ms
apart inside a host: far from every threshold. Here each collective's arrivals (ns) are written
by hand: a separation of exactly 3× the largest spread inside a host, a host late in exactly half
the collectives, a separation under host clocks' resolution (0.1 ms), a rank whose host is unknown.
"""

from __future__ import annotations

from my_utils.profiling.nsys.nccl_hosts import HOST_FACTOR, MIN_SEPARATION_NS, HostTally, host_straggler

HOSTS = {0: "node-a", 1: "node-a", 2: "node-b", 3: "node-b"}


def tally(*collectives: tuple[int, int, int, int], host_of: dict[int, str | None] | None = None) -> HostTally:
    """One collective per tuple: the arrivals of ranks 0-3."""
    t = HostTally(HOSTS if host_of is None else host_of)
    for arrivals in collectives:
        t.add(list(enumerate(arrivals)))
    return t


def test_a_separation_of_exactly_three_spreads_makes_the_host_the_straggler() -> None:
    """node-a's ranks arrive 100 µs apart, node-b's together 300 µs after node-a's last: 3 × 100 µs exactly."""
    assert HOST_FACTOR == 3.0
    late = host_straggler(tally((0, 100_000, 400_000, 400_000)).result())
    assert late is not None and late.host == "node-b" and late.separation_min_ns == 300_000
    assert host_straggler(tally((0, 100_000, 399_999, 399_999)).result()) is None


def test_a_host_late_in_half_the_collectives_is_no_straggler() -> None:
    """node-b is 1 ms late at two collectives, node-a 1 µs late at two others: late in half is no pattern."""
    hosts = tally((0, 0, 1_000_000, 1_000_000), (0, 0, 1_000_000, 1_000_000),
                  (1_000, 1_000, 0, 0), (1_000, 1_000, 0, 0)).result()
    assert (hosts[0].host, hosts[0].late, hosts[0].collectives) == ("node-b", 2, 4)
    assert host_straggler(hosts) is None


def test_hosts_closer_than_a_tenth_of_a_millisecond_cannot_be_told_apart() -> None:
    assert MIN_SEPARATION_NS == 100_000
    assert host_straggler(tally((0, 0, 50_000, 50_000), (0, 0, 50_000, 50_000)).result()) is None
    assert host_straggler(tally((0, 0, 100_000, 100_000), (0, 0, 100_000, 100_000)).result()) is not None


def test_a_collective_with_a_rank_of_unknown_host_is_not_tallied_by_host() -> None:
    t = tally((0, 0, 1_000_000, 1_000_000), host_of={0: "node-a", 1: "node-a", 2: "node-b", 3: None})
    assert t.result() == ()
