"""The rules' evidence and host helpers read from connection table rows give what they give
from the connections' records (IB004 reads rows, not a record per connection)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ncclscope import api
from ncclscope.model.connections import connections
from ncclscope.model.job import Job
from ncclscope.model.views import views
from ncclscope.rules._failures import _on_hosts, _spread, _where
from ncclscope.rules.ib.ib004_gpu_direct_rdma_disabled import _spread_rows
from tests.helpers import REAL, bigjob, real_logs


def _check(job: Job) -> str:
    """Rows and records agree for every limit; how _spread picks here: ``spreads`` (as many
    hosts as lines asked, a first row each), ``fills`` (later rows of hosts picked already)
    or ``plain`` (a row per host, no more)."""
    rows = views(job).placed
    conns = connections(job)
    records = conns.records_at(rows.get_column("i").to_list())
    for limit in range(7):
        assert conns.records_at(_spread_rows(rows, limit)) == _spread(records, limit), limit
    assert _on_hosts(rows.get_column("host")) == _where(records)
    hosts = rows.get_column("host").n_unique()
    return "spreads" if hosts >= 5 else "fills" if rows.height > hosts else "plain"


@pytest.mark.parametrize("log", [str(p.relative_to(REAL)) for p in real_logs()])
def test_spread_of_rows_is_spread_of_their_records(log: str) -> None:
    _check(api.build([REAL / log])[0])


def test_the_ways_spread_picks_are_all_met(tmp_path: Path) -> None:
    gen = bigjob()
    big = tmp_path / "big.log"
    gen.write(big, gen.BigJob(8))
    shapes = {_check(api.build([log])[0]) for log in [*real_logs(), big]}
    assert {"spreads", "fills"} <= shapes
