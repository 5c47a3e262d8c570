"""Pictures of what NCCL built: the model against the raw log lines, the renderers, hang tables and
bandwidth against the wire. Golden pictures of every fixture are in tests/golden/topo/ (written by
tests/regen.py through tests/regen_extra.py, checked by tests/test_golden.py)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from ncclscope import api
from ncclscope.cli import main
from ncclscope.model.bandwidth import bandwidth_check
from ncclscope.model.job import HIGH_VOLUME_KINDS, build_job
from ncclscope.model.topo import (
    UNKNOWN_COMM,
    CommTopology,
    JobTopology,
    Link,
    build_topology,
)
from ncclscope.parse.parser import parse_text
from ncclscope.report.topo_dot import dot_string, render_topo_dot
from ncclscope.report.topo_mermaid import mermaid_label, render_topo_mermaid
from ncclscope.report.topo_svg import render_topo_svg
from ncclscope.report.topo_text import render_topo_text
from tests.helpers import REAL

# -- the matrix and rings against the log, line by line --------------------------------------

# ``Channel 02/0 : 1[1] -> 9[1] [send] via NET/IB/0(0)/GDRDMA``; ``Ring 00 : 13[89000] -> 14[…]``
_CONN = re.compile(
    r"NCCL (?:INFO|TRACE) (?:Channel|Ring) (\d+)(?:/\d+)? : (\d+)\[[0-9a-fA-F]*\] (->|<-) "
    r"(\d+)\[[0-9a-fA-F]*\](?: \[(send|receive)\])? via (.+?)(?: comm 0x[0-9a-f]+ nRanks \d+)?\s*$"
)
# ``Channel 00/24 :    0   1   2   3`` (rank 0's ring order)
_ORDER = re.compile(r"NCCL INFO (?:Channel|Ring) (\d+)(?:/\d+)? :((?:\s+\d+)+)\s*$")
# ``Ring 00 : 7 -> 0 -> 1`` (previous -> me -> next)
_NEIGHBOURS = re.compile(r"NCCL INFO Ring (\d+) : (\d+) -> (\d+) -> (\d+)\s*$")
_CHANNEL_NUMBERS = re.compile(r"/\d+(\(\d+\))?")


def _walk(
    log: Path,
) -> tuple[dict[tuple[int, int], set[str]], dict[int, list[int]], list[tuple[int, int, int]]]:
    links: dict[tuple[int, int], set[str]] = defaultdict(set)
    orders: dict[int, list[int]] = {}
    neighbours: list[tuple[int, int, int]] = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        m = _CONN.search(line)
        if m:
            a, arrow, b, via = int(m.group(2)), m.group(3), int(m.group(4)), m.group(6)
            src, dst = (a, b) if arrow == "->" else (b, a)
            links[(src, dst)].add(_CHANNEL_NUMBERS.sub("", via.strip()))
            continue
        m = _ORDER.search(line)
        if m:
            orders.setdefault(int(m.group(1)), [int(x) for x in m.group(2).split()])
            continue
        m = _NEIGHBOURS.search(line)
        if m:
            neighbours.append((int(m.group(1)), int(m.group(3)), int(m.group(4))))
    return links, orders, neighbours


def _topology(log: Path) -> JobTopology:
    job, _ = api.build([log])
    return build_topology(job)


# one communicator each: every connection line of the log belongs to it
WALKED = [
    "041-rtx4090-8gpu-all-shm.log",  # 8 GPUs of one node, all SHM
    "043-4xa100-mixed-p2p-shm.log",
    "077-aws-container-p2p-ipc-read-rings.log",
    "long/L02-a100-pcie-pair-subsys-all-2.27.log",  # NVLink-bridged pair, topology dump
    "long/L04-eks-p4d-efa-mpirun-2.9.log",  # 2 × 8 A100 over NVLink, EFA between nodes
    "long/L05-cori-shifter-no-ib-socket-2.5.log",  # 2 nodes over sockets
    "long/L06-jeanzay-a100-omnipath-4node-2.10.log",  # 4 nodes over NET/IB
]


@pytest.mark.parametrize("name", WALKED)
def test_matrix_matches_every_connection_line(name: str) -> None:
    log = REAL / name
    want, _, _ = _walk(log)
    assert want, f"{name}: the walk found no connection line"
    topo = _topology(log)
    drawn = [c for c in topo.comms if c.links]
    assert len(drawn) == 1, [c.key for c in drawn]
    got = {pair: set(link.classes) for pair, link in drawn[0].links.items()}
    assert got == dict(want)


@pytest.mark.parametrize("name", WALKED)
def test_rings_match_the_ring_lines(name: str) -> None:
    log = REAL / name
    _, orders, neighbours = _walk(log)
    topo = _topology(log)
    rings = {ch: ring for c in topo.comms for ring in c.rings for ch in ring.channels}
    for ch, order in orders.items():
        assert rings[ch].order == tuple(order), (name, ch)
    for ch, me, nxt in neighbours:
        ring = rings[ch].order
        i = ring.index(me)
        if i + 1 < len(ring):
            assert ring[i + 1] == nxt, (name, ch, me)
        else:
            assert ring[0] == nxt, (name, ch, me)


def test_multi_node_ring_crossings_follow_the_hosts() -> None:
    topo = _topology(REAL / "long/L05-cori-shifter-no-ib-socket-2.5.log")
    (comm,) = [c for c in topo.comms if c.links]
    assert comm.hosts == ["cgpu15", "cgpu16"]
    for ring in comm.rings:
        assert not ring.partial
        hops = list(zip(ring.order, ring.order[1:] + ring.order[:1], strict=True))
        want = [(a, b) for a, b in hops if (a < 8) != (b < 8)]
        assert list(ring.crossings) == want
        assert len(want) == 2
    # sockets between the nodes are what the picture marks
    socket_links = [lk for lk in comm.links.values() if lk.label == "SOCK"]
    assert socket_links and all(lk.anomaly == "sockets between nodes" for lk in socket_links)
    assert all(lk.crosses_node for lk in socket_links)


def test_nvlink_pair_is_labelled_from_the_topology_paths() -> None:
    topo = _topology(REAL / "long/L02-a100-pcie-pair-subsys-all-2.27.log")
    (comm,) = [c for c in topo.comms if c.links]
    assert {lk.label for lk in comm.links.values()} == {"NVL"}
    assert len(comm.rings) == 1 and comm.rings[0].channels == tuple(range(24))
    node = topo.nodes[0]
    assert [g.bus_id for g in node.gpus] == ["0000:17:00.0", "0000:65:00.0"]
    assert {(n.name, n.speed_gbps) for n in node.nics if n.kind == "RoCE"} == {
        ("mlx5_0:1", 100.0),
        ("mlx5_1:1", 100.0),
    }


def test_lines_of_several_communicators_are_kept_apart() -> None:
    topo = _topology(REAL / "long/L03-vllm-ray-2node-ib-gdrdma-2.21.log")
    for comm in topo.comms:
        for a, b in comm.links:
            assert a < comm.nranks and b < comm.nranks, comm.key
    two = [c for c in topo.comms if c.nranks == 2 and c.links]
    assert two and all(lk.label == "IB+GDR" for c in two for lk in c.links.values())


# -- renderers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["long/L05-cori-shifter-no-ib-socket-2.5.log", "long/L06-jeanzay-a100-omnipath-4node-2.10.log"],
)
def test_svg_is_well_formed_with_one_node_per_rank_and_one_path_per_pair(name: str) -> None:
    log = REAL / name
    want, _, _ = _walk(log)
    pairs = {(min(a, b), max(a, b)) for a, b in want}
    topo = _topology(log)
    (comm,) = [c for c in topo.comms if c.links]
    root = ET.fromstring(render_topo_svg(topo))
    ns = "{http://www.w3.org/2000/svg}"
    ranks = [g for g in root.iter(f"{ns}g") if g.get("class") == "rank"]
    paths = [p for p in root.iter(f"{ns}path") if p.get("class") == "link"]
    assert len(ranks) == comm.nranks
    assert len(paths) == len(pairs)
    red = [p for p in paths if p.get("stroke") == "#d50000"]
    assert len(red) == len({pr for pr, lk in comm.links.items() if lk.anomaly and pr[0] < pr[1]})


def test_mermaid_and_dot_draw_every_pair_once() -> None:
    topo = _topology(REAL / "long/L06-jeanzay-a100-omnipath-4node-2.10.log")
    (comm,) = [c for c in topo.comms if c.links]
    edges = comm.edges()
    mermaid = render_topo_mermaid(topo)
    assert mermaid.startswith("flowchart LR\n")
    assert len(re.findall(r"^\s+c0r\d+ (?:---|-->)\|", mermaid, re.M)) == len(edges)
    assert mermaid.count("subgraph c0h") == 4
    dot = render_topo_dot(topo)
    assert len(re.findall(r"^\s+c0r\d+ -> c0r\d+ \[", dot, re.M)) == len(edges)
    assert dot.count("subgraph cluster_c0h") == 4


def _hostile() -> JobTopology:
    host = 'evil"]-->x[<script>alert(1)</script>`` |\x1b[31m'
    comm = CommTopology(key="0x1", nranks=2, host_of_rank={0: host, 1: "ok"})
    comm.links = {(0, 1): Link(0, 1, "IB", ("NET/IB",), (0,), True)}
    return JobTopology(nodes=[], comms=[comm])


def test_log_text_cannot_break_out_of_any_picture() -> None:
    topo = _hostile()
    mermaid = render_topo_mermaid(topo)
    assert "<script>" not in mermaid and "`" not in mermaid and '"]-->' not in mermaid
    assert "\x1b" not in mermaid
    assert mermaid_label('a"b') == "a#34;b"
    dot = render_topo_dot(topo)
    assert '\\"]-->x' in dot and "\x1b" not in dot
    assert dot_string('a"b\\') == '"a\\"b\\\\"'
    svg = render_topo_svg(topo)
    ET.fromstring(svg)  # still well-formed
    assert "<script>" not in svg and "\x1b" not in svg
    text = render_topo_text(topo)
    assert "\x1b" not in text and "\\x1b" in text


def test_markdown_report_embeds_the_picture_only_when_there_is_one() -> None:
    from ncclscope.report.markdown import render_markdown

    with_picture = render_markdown(
        api.diagnose([REAL / "long/L05-cori-shifter-no-ib-socket-2.5.log"])
    )
    assert "## Topology" in with_picture and "```mermaid\nflowchart LR" in with_picture
    without = render_markdown(api.diagnose([REAL / "002-roce-ipv6-gid-status12-vendor129.log"]))
    assert "## Topology" not in without


# -- hang table --------------------------------------------------------------------------------

_HANG_LOG = """\
n1:10:10 [0] NCCL INFO ncclCommInitRank comm 0xa0 rank 0 nranks 5 cudaDev 0 nvmlDev 0 busId 18000 commId 0x77 - Init START
n1:10:10 [0] NCCL INFO ncclCommInitRank comm 0xa0 rank 0 nranks 5 cudaDev 0 nvmlDev 0 busId 18000 commId 0x77 - Init COMPLETE
n1:11:11 [1] NCCL INFO ncclCommInitRank comm 0xb0 rank 1 nranks 5 cudaDev 1 nvmlDev 1 busId 2a000 commId 0x77 - Init START
n1:11:11 [1] NCCL INFO ncclCommInitRank comm 0xb0 rank 1 nranks 5 cudaDev 1 nvmlDev 1 busId 2a000 commId 0x77 - Init COMPLETE
n1:12:12 [2] NCCL INFO ncclCommInitRank comm 0xc0 rank 2 nranks 5 cudaDev 2 nvmlDev 2 busId 3a000 commId 0x77 - Init START
n1:12:12 [2] NCCL INFO ncclCommInitRank comm 0xc0 rank 2 nranks 5 cudaDev 2 nvmlDev 2 busId 3a000 commId 0x77 - Init COMPLETE
n1:13:13 [3] NCCL INFO ncclCommInitRank comm 0xd0 rank 3 nranks 5 cudaDev 3 nvmlDev 3 busId 5d000 commId 0x77 - Init START
n1:10:10 [0] NCCL INFO AllReduce: opCount 5 sendbuff 0x7f0 recvbuff 0x7f0 count 1024 datatype 7 op 0 root 0 comm 0xa0 [nranks=5] stream 0x1
n1:11:11 [1] NCCL INFO AllReduce: opCount 5 sendbuff 0x7f0 recvbuff 0x7f0 count 1024 datatype 7 op 0 root 0 comm 0xb0 [nranks=5] stream 0x1
n1:12:12 [2] NCCL INFO AllGather: opCount 4 sendbuff 0x7f0 recvbuff 0x7f0 count 256 datatype 7 op 0 root 0 comm 0xc0 [nranks=5] stream 0x1
"""


def test_hang_table_names_stuck_behind_and_silent_ranks() -> None:
    job = build_job(parse_text(_HANG_LOG, source="case.log"), HIGH_VOLUME_KINDS)
    (comm,) = build_topology(job).comms
    hang = comm.hang
    assert hang is not None
    assert hang.top_op_count == 5
    assert hang.never_completed == (3,)
    assert hang.behind == (2,)
    assert hang.silent == (4,)
    row = hang.rows[2]
    assert (row.init, row.last_op_count, row.last_op, row.last_count) == (
        "complete",
        4,
        "AllGather",
        256,
    )
    text = render_topo_text(build_topology(job))
    assert "never completed init: 3" in text and "behind opCount 5: 2" in text
    assert "printed nothing: 4" in text


# -- bandwidth against the wire ----------------------------------------------------------------


def test_bandwidth_ratio_of_the_nvlink_pair() -> None:
    job, _ = api.build([REAL / "long/L02-a100-pcie-pair-subsys-all-2.27.log"])
    check = bandwidth_check(job)
    assert check.achieved is not None and check.achieved.kind == "average"
    assert check.capacity is not None and check.capacity.gbs == 240.0
    assert check.capacity.kind == "ring graph"
    assert check.ratio == pytest.approx(178.078 / 240.0)


def test_bandwidth_peak_row_without_printed_capacity() -> None:
    job, _ = api.build([REAL / "long/L04-eks-p4d-efa-mpirun-2.9.log"])
    check = bandwidth_check(job)
    assert check.achieved is not None
    assert (check.achieved.busbw, check.achieved.size) == (43.81, 4294967296)
    assert check.capacity is None and check.ratio is None


# -- CLI ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["text", "mermaid", "dot", "svg"])
def test_cli_topo_formats(fmt: str) -> None:
    log = str(REAL / "long/L02-a100-pcie-pair-subsys-all-2.27.log")
    result = CliRunner().invoke(
        main, ["topo", "--format", fmt, "--comm", "0x54fe282d32a87d85", log]
    )
    assert result.exit_code == 0, result.output
    assert "NVL" in result.output


def test_cli_topo_unknown_communicator_is_a_one_line_error() -> None:
    log = str(REAL / "041-rtx4090-8gpu-all-shm.log")
    result = CliRunner().invoke(main, ["topo", "--comm", "0xdead", log])
    assert result.exit_code == 2
    assert "no communicator '0xdead'" in result.output
    assert UNKNOWN_COMM in result.output
