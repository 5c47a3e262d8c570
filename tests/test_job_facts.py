"""The job model's counts against what the corpus yaml states.

The long logs' ``facts`` were counted from the text with a script and checked with grep (hosts,
host:pid pairs, Init COMPLETE lines, commIds); ``nranks``/``nnodes`` come from the job's setting.
The model must give the same numbers although some lines are damaged: another writer's text glued
in front of the host name (L02: ``-1mew0``), a collector cutting the start of a host name or the
end of an Init line (L03: ``pseek-v2-5-0-1``, ``... nranks 2 cud``).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ncclscope import api
from ncclscope.model.summary import summarise
from ncclscope.model.views import views
from ncclscope.parse.parser import parse_text
from tests.helpers import REAL, provenance, real_logs

LONG = sorted((REAL / "long").glob("*.log"))

#: facts the model cannot reach from what the parser gives it, with why (strict: fixing one
#: turns its xfail into a failure, so the entry has to go)
KNOWN_GAPS: dict[tuple[str, str], str] = {}


def _facts(log: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    meta = provenance(log)
    return meta, dict(meta.get("facts") or {})


def _gap(log: Path, what: str, holds: bool) -> None:
    """xfail a known gap; fail once it is closed, so its KNOWN_GAPS entry goes."""
    reason = KNOWN_GAPS.get((log.name[:3], what))
    if reason is not None:
        assert not holds, f"{log.name}: {what} now equals the facts; remove it from KNOWN_GAPS"
        pytest.xfail(reason)


@pytest.mark.parametrize("log", LONG, ids=[p.name[:3] for p in LONG])
def test_hosts_and_processes_equal_facts(log: Path) -> None:
    _meta, facts = _facts(log)
    job, _stats = api.build([log])
    assert job.hosts == sorted(facts["hosts"])
    per_host = Counter(h for h, _pid in job.processes if h is not None)
    _gap(
        log,
        "processes",
        len(job.processes) == facts["distinct_host_pid_pairs"]
        and dict(per_host) == facts["host_pid_pairs_per_host"],
    )
    assert len(job.processes) == facts["distinct_host_pid_pairs"]
    assert dict(per_host) == facts["host_pid_pairs_per_host"]


@pytest.mark.parametrize("log", LONG, ids=[p.name[:3] for p in LONG])
def test_ranks_nodes_communicators_equal_facts(log: Path) -> None:
    meta, facts = _facts(log)
    job, _stats = api.build([log])
    s = summarise(job)
    assert s.init_complete == facts["init_complete_lines"]
    if "distinct_commIds" in facts:
        assert s.communicators == facts["distinct_commIds"]
    assert s.ranks == meta["nranks"]
    assert s.nodes == meta["nnodes"]


def test_spliced_host_names_are_repaired_and_counted() -> None:
    """L02: nccl-tests table cells glued to ``mew0:64904:`` on 22 lines; all are mew0's."""
    log = REAL / "long" / "L02-a100-pcie-pair-subsys-all-2.27.log"
    glued = sum(
        1
        for line in log.read_text(encoding="utf-8").splitlines()
        if re.search(r"\S(mew0):64904:", line)
    )
    job, _stats = api.build([log])
    assert job.hosts == ["mew0"]
    assert {r.printed for r in job.repairs} == {"-1mew0", "0mew0"}
    assert sum(r.records for r in job.repairs) == glued == 22
    assert summarise(job).repaired_lines == glued


def test_cut_host_name_and_cut_init_line() -> None:
    """L03: a Ray fragment cut to ``pseek-v2-5-0-1``; an Init COMPLETE cut after ``nranks 2``
    (line 321, its tail is line 470) of a rank whose START is on line 389."""
    log = REAL / "long" / "L03-vllm-ray-2node-ib-gdrdma-2.21.log"
    job, _stats = api.build([log])
    assert [(r.printed, r.host, r.pid) for r in job.repairs] == [
        ("pseek-v2-5-0-1", "deepseek-v2-5-0-1", 627)
    ]
    v = views(job)
    assert [(s.line, s.phase, s.rank, s.nranks) for s in v.salvaged] == [(321, "COMPLETE", 1, 2)]
    comm = v.communicators["0x9bdf58487a45133a"]
    assert comm.ranks[1].complete is not None and comm.stuck_in_init == []


@pytest.mark.parametrize("log", real_logs(), ids=[p.name for p in real_logs()])
def test_no_host_is_a_damaged_copy_of_another(log: Path) -> None:
    """After repair, no host of a real log shares a pid with a host whose name ends like it."""
    job, _stats = api.build([log])
    pids: dict[str, set[int | None]] = {}
    for host, pid in job.processes:
        if host is not None:
            pids.setdefault(host, set()).add(pid)
    for a in pids:
        for b in pids:
            if a != b and (a.endswith(b) or b.endswith(a)):
                assert not pids[a] & pids[b], (log.name, a, b)


def _job(text: str) -> Any:
    from ncclscope.model.job import build_job

    return build_job(parse_text(text, source="case"))


def test_near_miss_hosts_that_end_alike_but_share_no_process() -> None:
    """``node1`` and ``gpunode1`` are two machines when no pid of one is printed by the other."""
    job = _job(
        "node1:100:100 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
        "node1:100:100 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
        "gpunode1:200:200 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n"
    )
    assert job.hosts == ["gpunode1", "node1"]
    assert job.repairs == []


def test_near_miss_same_pid_on_two_containers_with_unrelated_names() -> None:
    """Containers reuse pids (L04: pid 25 on both workers); names that do not end alike stay."""
    job = _job(
        "worker-0:25:25 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
        "worker-1:25:25 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n"
    )
    assert job.hosts == ["worker-0", "worker-1"]
    assert job.repairs == []


def test_a_job_its_caller_drops_is_freed_without_the_collector() -> None:
    """The views a job keeps (``job.cache``) refer back to it weakly: a job dropped after a
    diagnosis is freed by reference counts, not left for the collector's next full pass over
    all its records (a notebook or a service reading job after job)."""
    import gc
    import weakref

    from ncclscope.engine import Selection, run_rules

    log = max(LONG, key=lambda p: p.stat().st_size)
    job, _stats = api.build([log])
    run_rules(job, Selection((), ()))
    summarise(job)
    assert "views" in job.cache
    gone = weakref.ref(job)
    was = gc.isenabled()
    gc.disable()
    try:
        del job
        assert gone() is None
    finally:
        if was:
            gc.enable()
