"""Big jobs: long ring lines, communicator attribution, findings and reports at scale.

The logs come from benchmarks/bigjob.py (NCCL 2.21.5 lines of the corpus's L03, world + TP + DP
communicators); small node counts keep this fast, the 1,024 and 4,096 GPU runs are the
benchmark's.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ncclscope import api
from ncclscope.cli import main
from ncclscope.engine import Diagnosis, fold_alike
from ncclscope.model.connections import connections, transport_class
from ncclscope.model.enums import Transport
from ncclscope.model.hostgraph import (
    HostBox,
    HostGraph,
    HostLink,
    _place,
    build_host_graph,
    faulty_hosts,
)
from ncclscope.model.job import Job
from ncclscope.model.records.init import InitTimings
from ncclscope.model.records.topology import Connection, RingOrder
from ncclscope.model.views import views
from ncclscope.report.markdown import render_markdown
from ncclscope.report.topo_mermaid import (
    MERMAID_MAX_CHARS,
    MERMAID_MAX_EDGES,
    render_hosts_mermaid,
)
from ncclscope.rules.base import Category, Evidence, Finding, Severity
from tests.helpers import REAL, bigjob, real_logs

NODES = 16


def _write(tmp: Path, name: str, **faults: Any) -> Path:
    gen = bigjob()
    path = tmp / f"{name}.log"
    gen.write(path, gen.BigJob(NODES, **faults))
    return path


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Diagnosis:
    return api.diagnose([_write(tmp_path_factory.mktemp("big"), "healthy")])


@pytest.fixture(scope="module")
def faulty_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write(tmp_path_factory.mktemp("big"), "faulty", no_ib=(3,), stuck=(42,))


@pytest.fixture(scope="module")
def faulty(faulty_log: Path) -> Diagnosis:
    return api.diagnose([faulty_log])


def test_full_ring_of_a_thousand_ranks_is_read(tmp_path: Path) -> None:
    # NCCL < 2.23 prints each ring in full: 1,100 ranks on one line crashed the fast path's
    # pattern learning (RecursionError) before it left long lines to Lark.
    order = "".join(f" {r:3d}" for r in range(1100))
    lines = [f"node-0000:1:1 [0] NCCL INFO Channel {ch:02d}/24 :{order}\n" for ch in range(4)]
    log = tmp_path / "ring.log"
    log.write_text("".join(lines), encoding="utf-8")
    result = api.diagnose([log])
    rings = result.job.of(RingOrder)
    assert len(rings) == 4
    assert tuple(rings[0].ranks) == tuple(range(1100))
    assert not result.job.unrecognized


def test_truncated_rings_of_2_23_are_typed(tmp_path: Path) -> None:
    gen = bigjob()
    log = tmp_path / "trunc.log"
    gen.write(log, gen.BigJob(8, newer=True))
    result = api.diagnose([log])
    rings = [r for r in result.job.of(RingOrder) if r.truncated]
    assert rings and not result.job.unrecognized
    assert not [f for f in result.findings if f.severity >= Severity.WARNING]


def test_healthy_big_job_has_no_warning(healthy: Diagnosis) -> None:
    assert [(f.rule, f.message) for f in healthy.findings if f.severity >= Severity.WARNING] == []


def test_connection_lines_resolve_in_their_communicator(healthy: Diagnosis) -> None:
    v = views(healthy.job)
    # A DP group's neighbours 3 -> 4 are GPUs of nodes 3 and 4, not world ranks 3 and 4 (node 0).
    dp = [
        c
        for c in healthy.job.of(Connection)
        if c.transport_detail.startswith("NET/") and c.from_rank == 3 and c.to_rank == 4
    ]
    assert dp
    for conn in dp:
        key = v.comm_of(conn)
        assert key is not None
        comm = v.communicators[key]
        assert comm.nranks in (NODES, NODES * 8)
        assert v.crosses_nodes(conn) is (comm.nranks == NODES)
    # every connection line is placed, and no P2P line crosses nodes
    assert v.placed.get_column("comm").null_count() == 0
    for conn in healthy.job.of(Connection):
        if conn.transport_detail.startswith("P2P"):
            assert v.crosses_nodes(conn) is False


def test_communicator_families(healthy: Diagnosis) -> None:
    families = views(healthy.job).families
    assert [f.describe() for f in families] == [
        f"1 communicator of {NODES * 8} ranks on {NODES} nodes, "
        + ", ".join(f"{t} ×{n}" for t, n in families[0].transports),
        f"8 communicators of {NODES} ranks on {NODES} nodes each, all NET/IB/GDRDMA",
        f"{NODES} communicators of 8 ranks on 1 node each, all P2P/IPC/read",
    ]


def test_host_off_ib_and_rank_stuck_are_two_findings(faulty: Diagnosis) -> None:
    got = [(f.rule, f.severity) for f in faulty.findings]
    assert got == [("NET001", Severity.ERROR), ("HANG002", Severity.WARNING)]
    net, hang = faulty.findings
    assert "node-0003" in net.message and "1 host(s)" in net.message
    assert "rank(s) 42 " in hang.message and "node-0005" in hang.message


def test_other_nccl_version_on_one_host(tmp_path: Path) -> None:
    result = api.diagnose([_write(tmp_path, "version", other_version=(5,))])
    assert [f.rule for f in result.findings] == ["VER001"]
    assert "2.20.5+cuda12.4 (1 banner(s) on node-0005)" in result.findings[0].message


def test_alike_findings_fold_into_one() -> None:
    def finding(host: str, n: int) -> Finding:
        ev = Evidence("log", n, f"{host}:1:1 [0] NCCL INFO x", host)
        return Finding(
            "P2P002",
            "intra-node-shm-instead-of-p2p",
            Category.P2P_DISABLED,
            Severity.WARNING,
            f"On {host}, {n} GPU pair(s) over SHM (0-1) instead of P2P.",
            "fix",
            (ev,),
        )

    hosts = [f"node-{i:04d}" for i in range(8)]
    folded = fold_alike([finding(h, i + 1) for i, h in enumerate(hosts)])
    assert len(folded) == 1
    msg = folded[0].message
    assert msg.startswith("The same on 8 hosts (node-0000, node-0001, node-0002, node-0003, ")
    assert "and 3 more" in msg and msg.endswith(
        "On node-0000, 1 GPU pair(s) over SHM (0-1) instead of P2P."
    )
    assert len(folded[0].evidence) == 5
    # another problem on another host stays apart, and a single finding stays as it was
    other = replace(finding("node-0009", 2), message="On node-0009, NET inside a node.")
    assert fold_alike([finding(hosts[0], 1), other]) == [finding(hosts[0], 1), other]


def test_markdown_fits_its_budget(faulty: Diagnosis) -> None:
    whole = render_markdown(faulty, budget=0)
    assert len(whole) == len(render_markdown(faulty)) < 60_000
    for budget in (len(whole) - 1, 3000, 2500):
        cut = render_markdown(faulty, budget=budget)
        assert len(cut) <= budget
        assert "| error | NET001" in cut and "| warning | HANG002" in cut
        assert "cut to fit" in cut
    assert "cut to fit" not in whole
    assert "<details><summary>Evidence" in render_markdown(faulty, budget=len(whole) - 1)
    # a small budget keeps the summary table and drops finding sections, saying so
    assert "described in the JSON report" in render_markdown(faulty, budget=2500)
    # below the summary itself, the text is cut at a line and says so
    floor = render_markdown(faulty, budget=600)
    assert len(floor) <= 600 and "Cut to fit" in floor


def test_cli_markdown_budget_and_full_report(faulty_log: Path, tmp_path: Path) -> None:
    full = tmp_path / "full.md"
    res = CliRunner().invoke(
        main,
        [
            "diagnose",
            str(faulty_log),
            "--format",
            "markdown",
            "--markdown-budget",
            "4000",
            "--full-report",
            str(full),
        ],
    )
    assert res.exit_code == 1, res.output
    assert len(res.output) <= 4000
    assert len(full.read_text(encoding="utf-8")) > 4000
    bad = CliRunner().invoke(
        main, ["diagnose", str(faulty_log), "--full-report", str(tmp_path / "no/such/dir/x")]
    )
    assert bad.exit_code == 2 and "Traceback" not in bad.output


def test_host_picture_folds_healthy_hosts_and_marks_faulty(faulty: Diagnosis) -> None:
    graph = build_host_graph(faulty.job, faulty_hosts(faulty.findings))
    assert len(graph.hosts) == NODES
    marked = {h: box for box in graph.boxes if box.faulty for h in box.hosts}
    assert sorted(marked) == ["node-0003", "node-0005"]
    assert any("NET001" in w for w in marked["node-0003"].why)
    assert any("HANG002" in w for w in marked["node-0005"].why)
    # the healthy hosts fold into runs: a handful of boxes for 16 hosts
    assert len(graph.boxes) <= 5
    assert sum(len(b.hosts) for b in graph.boxes) == NODES
    socket_links = [link for link in graph.links if link.anomaly]
    assert socket_links and all("SOCK" in link.label for link in socket_links)
    ib = [link for link in graph.links if not link.anomaly]
    assert ib and all("IB+GDR" in link.label and "rails" in link.label for link in ib)


def _placed_one_by_one(
    job: Job, index: dict[str, int]
) -> tuple[dict[int, Counter[str]], dict[tuple[int, int], HostLink], dict[int, set[str]]]:
    """What the host picture counts, read a connection record at a time: each placed in its
    communicator (``comm_of``), its ranks' hosts there (``hosts_in``)."""
    v = views(job)
    inside: dict[int, Counter[str]] = defaultdict(Counter)
    pairs: dict[tuple[int, int], HostLink] = {}
    why: dict[int, set[str]] = defaultdict(set)
    for conn in connections(job).records():
        where = v.hosts_in(v.comm_of(conn))
        ha = where.get(conn.from_rank)
        hb = where.get(conn.to_rank) if conn.to_rank is not None else None
        if ha not in index or hb not in index:
            continue
        a, b, lines = index[ha], index[hb], len(conn.printed_lines)
        net = conn.transport is Transport.NET
        if a == b:
            inside[a][transport_class(conn)] += lines
            if net:
                why[a].add("network inside the node")
            continue
        link = pairs.setdefault((min(a, b), max(a, b)), HostLink(min(a, b), max(a, b)))
        link.transports[transport_class(conn)] += lines
        if net and conn.net_dev is not None:
            link.rails.add(conn.net_dev)
        if conn.net_name == "Socket":
            link.anomaly = "sockets between nodes"
            if conn.host in index:
                why[index[conn.host]].add("sockets to other nodes")
    return inside, pairs, why


@pytest.mark.parametrize(
    "log",
    ["faulty", *(str(p.relative_to(REAL)) for p in real_logs())],
)
def test_host_picture_counts_what_each_connection_record_says(log: str, faulty_log: Path) -> None:
    """The picture's counts come from group-bys on the connection table (hostgraph._place):
    the same counts, in the same order (a Counter's ties are drawn in the order its keys
    came), as placing every connection record one at a time."""
    job = api.build([faulty_log if log == "faulty" else REAL / log])[0]
    index = {h: i for i, h in enumerate(sorted(job.hosts))}
    inside: dict[int, Counter[str]] = defaultdict(Counter)
    pairs: dict[tuple[int, int], HostLink] = {}
    why: dict[int, set[str]] = defaultdict(set)
    _place(views(job).placed, index, inside, pairs, why)
    want_inside, want_pairs, want_why = _placed_one_by_one(job, index)
    assert {a: list(c.items()) for a, c in inside.items()} == {
        a: list(c.items()) for a, c in want_inside.items()
    }
    assert list(pairs) == list(want_pairs)
    assert [(list(x.transports.items()), x.rails, x.anomaly) for x in pairs.values()] == [
        (list(x.transports.items()), x.rails, x.anomaly) for x in want_pairs.values()
    ]
    assert dict(why) == dict(want_why)
    if log == "faulty":
        assert any(link.anomaly for link in pairs.values()) and any(x.rails for x in pairs.values())


def test_host_picture_renders_small(faulty_log: Path) -> None:
    runner = CliRunner()
    svg = runner.invoke(main, ["topo", str(faulty_log), "--format", "svg"])
    assert svg.exit_code == 0, svg.output
    width, height = (int(x) for x in _svg_size(svg.output))
    assert width <= 1920 and height <= 1080, (width, height)
    mermaid = runner.invoke(main, ["topo", str(faulty_log), "--format", "mermaid"])
    assert mermaid.exit_code == 0
    assert len(mermaid.output) < MERMAID_MAX_CHARS and mermaid.output.count("---|") < 500
    assert ":::faulty" in mermaid.output
    # one communicator rank by rank, on request
    key = next(
        c.key for c in views(api.diagnose([faulty_log]).job).communicators.values() if c.nranks == 8
    )
    ranks = runner.invoke(main, ["topo", str(faulty_log), "--comm", key, "--format", "mermaid"])
    assert ranks.exit_code == 0 and "rank 7" in ranks.output


def test_host_picture_keeps_within_mermaid_limits() -> None:
    boxes = [
        HostBox([f"node-{i:04d}"], 8, faulty=i % 2 == 0, why=["x"] * (i % 2 == 0))
        for i in range(1200)
    ]
    links = [HostLink(i, i + 1) for i in range(1199)]
    for link in links:
        link.transports["NET/IB/GDRDMA"] += 1
    text = render_hosts_mermaid(HostGraph(boxes, links, [b.hosts[0] for b in boxes], []))
    assert len(text) <= MERMAID_MAX_CHARS
    assert text.count("---|") < MERMAID_MAX_EDGES
    assert "left out (size limit)" in text


def _svg_size(svg: str) -> tuple[str, str]:
    head = svg.split("<svg", 1)[1]
    width = head.split('width="', 1)[1].split('"', 1)[0]
    height = head.split('height="', 1)[1].split('"', 1)[0]
    return width, height


def test_slow_host_is_one_finding(tmp_path: Path) -> None:
    gen = bigjob()
    log = tmp_path / "slow.log"
    gen.write(log, gen.BigJob(NODES, newer=True, slow=(6,)))
    result = api.diagnose([log])
    assert not result.job.unrecognized
    timings = result.job.of(InitTimings)
    assert len(timings) == 3 * NODES * 8
    local = {t.host for t in timings if t.kernels > gen.SLOW_EXTRA}
    assert local == {"node-0006"}
    # its peers wait for it in bootstrap: the world and DP groups, not other nodes' TP groups
    waiting = {t.host for t in timings if t.bootstrap > gen.SLOW_EXTRA}
    assert len(waiting) == NODES - 1 and "node-0006" not in waiting
    assert [f.rule for f in result.findings] == ["HANG004"]
    assert "(node-0006)" in result.findings[0].message


# -- per-rank wording and volume against a real 2.21.5 rank ------------------------------------

#: the one process of the corpus's NCCL 2.21.5 job whose lines Ray did not fold: L03's leader
#: (fixtures/real/long/L03-vllm-ray-2node-ib-gdrdma-2.21.yaml), rank 0 of a TP group of 8 on
#: one node and of a pipeline pair across the two nodes, each created twice (vLLM's own, then
#: torch's with a config)
L03_LEADER = "deepseek-v2-5-0:5969:"
_HEAD = re.compile(r"^\S+:\d+:\d+ \[\d+\] NCCL INFO ")


def _shape(message: str) -> str:
    """A message with its numbers (ranks, devices, pointers, ids, a tree's -1) folded: the
    wording."""
    return re.sub(r"-?(0x[0-9a-f]+|[0-9a-f]*\d[0-9a-f]*)", "N", message)


def _blocks(messages: list[str]) -> tuple[list[str], list[list[str]]]:
    """The preamble (up to the first init's net lines) and each init, from its ``Comm config``
    or net lines to its ``Init COMPLETE``."""
    starts = [i for i, m in enumerate(messages) if m.endswith("- Init START")]
    cuts = []
    for s in starts:
        c = s
        while c > 0 and messages[c - 1].startswith(
            ("Using non-device", "Using network", "DMA-BUF", "Comm config")
        ):
            c -= 1
        cuts.append(c)
    ends = [i + 1 for i, m in enumerate(messages) if m.endswith("- Init COMPLETE")]
    return messages[: cuts[0]], [messages[c:e] for c, e in zip(cuts, ends, strict=True)]


def _real_leader() -> list[str]:
    log = REAL / "long" / "L03-vllm-ray-2node-ib-gdrdma-2.21.log"
    out = []
    for line in log.read_text(encoding="utf-8").splitlines():
        if line.startswith(L03_LEADER):
            message = _HEAD.sub("", line)
            # the deployment's own settings (NCCL_IB_DISABLE, NCCL_CUMEM_ENABLE, …) are not
            # the job's shape
            if " set by environment to " not in message:
                out.append(message)
    return out


def _generated_rank(rank: int) -> list[str]:
    gen = bigjob()
    job = gen.BigJob(2)
    head = f"{job.host(rank // 8)}:"
    lines = [x.rstrip("\n") for x in gen.lines(job)]
    pid = next(x for x in lines if x.startswith(head) and f" [{rank % 8}] " in x).split(":")[1]
    return [
        _HEAD.sub("", x) for x in lines if x.startswith(f"{head}{pid}:") and "NCCL version" not in x
    ]


def test_a_generated_rank_prints_what_a_real_2_21_rank_prints() -> None:
    real_pre, real_inits = _blocks(_real_leader())
    pre, inits = _blocks(_generated_rank(0))
    world, tp, dp = inits
    # the torch-made TP group of 8 and the pair across two nodes, line for line
    assert [_shape(m) for m in tp] == [_shape(m) for m in real_inits[2]]
    assert [_shape(m) for m in dp] == [_shape(m) for m in real_inits[3]]
    assert [_shape(m) for m in pre] == [_shape(m) for m in real_pre]
    # the first init of a process loads the tuner, as the leader's first did
    assert [m for m in world if m.startswith("TUNER/")] == [
        m for m in real_inits[0] if m.startswith("TUNER/")
    ]


def test_bytes_per_rank_are_a_real_ranks() -> None:
    """Bytes of NCCL messages per rank, against the leader's: its preamble, a TP-of-8 init and
    a cross-node pair's init (the leader's third and fourth inits: torch's, with a config),
    and the tree connections every rank past a group's first prints."""
    real_pre, real_inits = _blocks(_real_leader())
    size = sum(len(m) + 1 for m in real_pre + real_inits[2] + real_inits[3])
    pre, (_, tp, dp) = _blocks(_generated_rank(0))
    mine = sum(len(m) + 1 for m in pre + tp + dp)
    assert 0.95 * size <= mine <= 1.05 * size
    # ranks past 0 of a group also connect their tree upwards (L01, L04, L06 print these
    # between "Connected all rings" and "Connected all trees")
    _, (_, tp3, _) = _blocks(_generated_rank(3))
    between = tp3[tp3.index("Connected all rings") + 1 : tp3.index("Connected all trees")]
    assert between == [f"Channel {c:02d}/0 : 3[3] -> 2[2] via P2P/IPC/read" for c in range(24)]


@pytest.mark.usefixtures("columnar")
def test_each_log_of_a_crashed_job_ends_only_its_own_error_chains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crashed job of per-rank logs: each rank's log has collective lines (read as bulk rows)
    and ends in an error chain that stays open. A batch's rows can only end chains of its own
    threads, so the builder looks at no other: it looked at every open chain of every log read
    before, files × chains. Real lines of fixture 083
    (collectives) and 002 (the IB error chain), each log a process of its own."""
    from ncclscope.model import job

    coll = (REAL / "083-coll-subsys-send-recv-opcount-hang.log").read_text().splitlines()[:7]
    chain = (REAL / "002-roce-ipv6-gid-status12-vendor129.log").read_text().splitlines()[:4]
    logs = []
    for rank in range(24):
        host = f"node-{rank // 8}:{1000 + rank}:{2000 + rank}"
        lines = [re.sub(r"^[^ ]+:\d+:\d+", host, ln) for ln in coll + chain]
        logs.append(tmp_path / f"rank{rank}.log")
        logs[-1].write_text("\n".join(lines) + "\n")
    asked: list[int] = []
    merge = job._merge_thread_lines

    def counting(bulks: Any, threads: set[Any]) -> Any:
        asked.append(len(threads))
        return merge(bulks, threads)

    monkeypatch.setattr(job, "_merge_thread_lines", counting)
    diagnosis = api.diagnose(logs)
    assert len(diagnosis.job.chains) == len(logs)
    assert all(len(c.frames) == 3 for c in diagnosis.job.chains)
    assert asked and max(asked) <= 1
