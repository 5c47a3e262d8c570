"""Trace artifacts: recognised by content, read whole on every fixture, hostile ones refused."""

from __future__ import annotations

import os
import pickle
import time
import tracemalloc
from pathlib import Path

import pytest

from ncclscope import api
from ncclscope.model.records.base import Unrecognized
from ncclscope.model.records.traces import (
    FrEntry,
    GraphXmlChannel,
    InspectorPerf,
    ProfilerEvent,
    RasIssue,
    TopoXmlNet,
    TopoXmlNvlink,
)
from ncclscope.parse.parser import parse_path
from ncclscope.traces import ArtifactKind, TraceRefused, read_trace, sniff, sniff_path
from tests.helpers import FIXTURES, REAL, trace_samples

#: the samples of corpus/traces that are logs, not trace artifacts (read by the line parser)
LOG_SAMPLES = {
    "traces/graph_dump/panlichen_companion_nccl2.18.1_info.log",
    "traces/inspector/sugarlxn_exporter_output.log",
    "traces/nccl_tests/alcf_polaris_2node_a100_all_gather_default_env.dat",
    "traces/nccl_tests/odissei_h100_1node_4gpu_all_reduce.log",
    "traces/nccl_tests/thomaslie_a100pcie_2gpu_all_reduce_v2.17.6.txt",
}
#: a log of NVIDIA's Inspector exporter script: no NCCL line, all noise
NOT_NCCL = {"traces/inspector/sugarlxn_exporter_output.log"}


def _rel(p: Path) -> str:
    return str(p.relative_to(FIXTURES))


@pytest.mark.parametrize("sample", trace_samples(), ids=_rel)
def test_every_trace_sample_is_read_with_no_unrecognised_record(sample: Path) -> None:
    """Trace artifacts by their readers, the logs beside them (an INFO log with TRACE-build path
    lines, nccl-tests output of 2.17 with its proxy lines) by the line parser: nothing is left
    unrecognised. What is read is held by the goldens of tests/golden/traces."""
    kind = sniff_path(str(sample))
    if _rel(sample) in LOG_SAMPLES:
        assert kind is None
        records = list(parse_path(sample))
    else:
        assert kind is not None, f"{_rel(sample)} not recognised as a trace"
        records = read_trace(str(sample), kind).records
    if _rel(sample) not in NOT_NCCL:
        assert records
    bad = [r for r in records if isinstance(r, Unrecognized)]
    assert not bad, [(r.line, r.message) for r in bad]


def test_kind_comes_from_content_not_name(tmp_path: Path) -> None:
    src = FIXTURES / "traces/inspector/sugarlxn_2rank_allreduce_128MB_stone-pid2491276.log"
    renamed = tmp_path / "rank0.xml"
    renamed.write_bytes(src.read_bytes())
    assert sniff_path(str(renamed)) is ArtifactKind.INSPECTOR
    topo = tmp_path / "stderr.txt"
    topo.write_bytes((FIXTURES / "traces/topo_file/aws_p5.48xl-topo.xml").read_bytes())
    assert sniff_path(str(topo)) is ArtifactKind.TOPO_XML  # after its licence comment
    assert sniff(b"host:1:1 [0] NCCL INFO Bootstrap : Using eth0\n") is None
    assert sniff(b"<html><body>") is None


def test_compressed_artifacts_are_read(tmp_path: Path) -> None:
    import gzip

    src = FIXTURES / "traces/graph_dump/panlichen_8x_rtx3090_graph.xml"
    gz = tmp_path / "graph.bin"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    assert sniff_path(str(gz)) is ArtifactKind.GRAPH_XML
    assert len(read_trace(str(gz), ArtifactKind.GRAPH_XML).records) == 6


def test_facts_of_the_real_samples() -> None:
    fault = read_trace(
        str(FIXTURES / "traces/topo_dump/timez-zx_a100pcie_nvlink_fault_topo_dump.xml"),
        ArtifactKind.TOPO_XML,
    )
    counts = {r.busid: r.count for r in fault.records if isinstance(r, TopoXmlNvlink)}
    assert counts == {"0000:17:00.0": 1, "0000:65:00.0": 12}
    calico = read_trace(
        str(FIXTURES / "traces/topo_dump/sugarlxn_4x_rtx4090_calico_nics_topo.xml"),
        ArtifactKind.TOPO_XML,
    )
    names = [r.name for r in calico.records if isinstance(r, TopoXmlNet)]
    assert sum(n.startswith("cali") for n in names) >= 10 and "tunl0" in names
    prof = read_trace(
        str(FIXTURES / "traces/profiler_example/pha-Z_nccl2.28_p2p_trace_excerpt.json"),
        ArtifactKind.PROFILER,
    )
    sends = [r for r in prof.records if isinstance(r, ProfilerEvent) and r.cat == "P2P"]
    assert sends[0].comm == f"0x{12715772615376301750:x}" and sends[0].nchannels == 16
    api_send = next(r for r in prof.records if isinstance(r, ProfilerEvent) and r.cat == "P2P_API")
    assert "datatype=ncclFloat32" in api_send.extra  # 2.28's unquoted value
    insp = read_trace(
        str(FIXTURES / "traces/inspector/sugarlxn_2rank_allreduce_128MB_stone-pid2491276.log"),
        ArtifactKind.INSPECTOR,
    )
    first = insp.records[0]
    assert isinstance(first, InspectorPerf)
    assert (first.comm, first.host, first.pid, first.op, first.seq) == (
        "0xec4ad54506d878",
        "stone",
        2491276,
        "AllReduce",
        0,
    )
    ras = read_trace(
        str(FIXTURES / "traces/ras/nccl-issue1762_ras_text_outlier_incomplete_nocomm_2.27.3.txt"),
        ArtifactKind.RAS_TEXT,
    )
    ranks = [r for r in ras.records if isinstance(r, RasIssue) and r.what == "rank"]
    assert (ranks[0].comm, ranks[0].rank, ranks[0].process, ranks[0].node) == (
        "b3398875b8b2a063",
        1,
        60004,
        "10.4.109.13",
    )


def test_graph_dev_is_read_as_nccl_reads_it(tmp_path: Path) -> None:
    # 2.21.5+ writes %#lx ("0x1"); NCCL reads dev back as base 16, so a hand-written "10" is 16
    xml = tmp_path / "g.xml"
    xml.write_text(
        '<graphs version="1"><graph id="0" pattern="4" nchannels="1">'
        '<channel><net dev="0x1"/><gpu dev="0x0" rank="0"/><gpu dev="10" rank="1"/>'
        '<net dev="0x1"/></channel></graph></graphs>'
    )
    ch = [r for r in read_trace(str(xml), ArtifactKind.GRAPH_XML).records]
    chan = next(r for r in ch if isinstance(r, GraphXmlChannel))
    assert chan.gpus == (0, 16) and chan.ranks == (0, 1) and chan.nets == (1, 1)


def test_flight_recorder_pickle_is_read_without_torch() -> None:
    read = read_trace(
        str(FIXTURES / "documented/flight_recorder/nccl_trace_rank_1"),
        ArtifactKind.FLIGHT_RECORDER,
    )
    entries = [r for r in read.records if isinstance(r, FrEntry)]
    assert [e.profiling_name for e in entries] == [
        "nccl:all_reduce",
        "nccl:all_reduce",
        "nccl:broadcast",
    ]
    assert entries[0].rank == 1 and entries[2].call_site == "/workspace/train.py:60 (train_step)"


# -- hostile artifacts -------------------------------------------------------------------------


def _refused(path: Path, match: str) -> tuple[float, int]:
    """Read through the public API: the artifact is refused with a one-line reason and the job
    still holds the log beside it. Returns (seconds, peak bytes traced)."""
    log = path.parent / "rank0.log"
    log.write_text("host:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n")
    job, stats = api.build([str(path.parent)])
    kind = sniff_path(str(path))
    assert kind is not None
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(TraceRefused):
            read_trace(str(path), kind)
    finally:
        took = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    bad = [st for st in stats if st.source == str(path)]
    assert bad and bad[0].error is not None and match in bad[0].error, [s.error for s in stats]
    assert "\n" not in bad[0].error
    assert job.counts["version_banner"] == 1  # nothing else in the job is lost
    return took, peak


def test_deep_xml_nesting_is_refused(tmp_path: Path) -> None:
    depth = 100_000
    (tmp_path / "topo.xml").write_text(
        '<system version="1">' + "<pci>" * depth + "</pci>" * depth + "</system>"
    )
    took, peak = _refused(tmp_path / "topo.xml", "nests deeper")
    assert took < 5 and peak < 64 * 2**20


def test_entity_expansion_is_refused(tmp_path: Path) -> None:
    lol = ['<!ENTITY lol0 "lol">'] + [
        f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10}">' for i in range(1, 10)
    ]
    (tmp_path / "topo.xml").write_text(
        '<?xml version="1"?>\n<!DOCTYPE system [' + "".join(lol) + ']>\n<system version="1">'
        '<cpu numaid="&lol9;"/></system>'
    )
    took, peak = _refused(tmp_path / "topo.xml", "DOCTYPE")
    assert took < 5 and peak < 64 * 2**20


def test_a_1gb_json_line_is_refused_in_bounded_time_and_memory(tmp_path: Path) -> None:
    path = tmp_path / "stone-pid1.log"
    head = b'{"header":{"id":"0x1","rank":0},"coll_perf":{"coll":"AllReduce","x":"'
    with open(path, "wb") as f:
        f.write(head)
        f.seek(2**30)  # a sparse 1 GiB line: no disk, the same bytes to read through
        f.write(b'"}}\n')
    log = tmp_path / "rank0.log"
    log.write_text("host:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n")
    job, stats = api.build([str(tmp_path)])
    tracemalloc.start()
    start = time.perf_counter()
    read = read_trace(str(path), ArtifactKind.INSPECTOR)
    took = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert not read.records
    st = next(s for s in stats if s.source == str(path))
    assert any("over the line cap" in n for n in st.damaged.notes), st.damaged.notes
    assert job.counts["version_banner"] == 1
    assert peak < 64 * 2**20, peak
    assert took < 60, took


def test_a_1gb_json_document_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "rank_0.json"
    with open(path, "wb") as f:
        f.write(b'{"version": "2.8", "pg_config": {}, "entries": [')
        f.seek(2**30)
        f.write(b"]}")
    took, peak = _refused(path, "over 64 MiB")
    assert took < 30 and peak < 256 * 2**20


class _Evil:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch /tmp/ncclscope-pwned",))


def test_a_malicious_pickle_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    marker = Path("/tmp/ncclscope-pwned")
    marker.unlink(missing_ok=True)
    dump = {"version": "2.8", "pg_config": {}, "entries": [{"profiling_name": _Evil()}]}
    (tmp_path / "nccl_trace_rank_0").write_bytes(pickle.dumps(dump, protocol=2))
    _refused(tmp_path / "nccl_trace_rank_0", "refused")
    assert not marker.exists()


def test_a_cut_xml_file_is_a_one_line_refusal(tmp_path: Path) -> None:
    (tmp_path / "topo.xml").write_text('<system version="1"><cpu numaid="0">')
    _refused(tmp_path / "topo.xml", "not well-formed")


def test_refusal_is_an_exception_for_the_library_caller(tmp_path: Path) -> None:
    (tmp_path / "g.xml").write_text("<!DOCTYPE x><graphs/>")
    with pytest.raises(TraceRefused):
        read_trace(str(tmp_path / "g.xml"), ArtifactKind.GRAPH_XML)


def test_diagnose_a_job_directory_of_a_log_and_its_traces(tmp_path: Path) -> None:
    """The Panlichen job: its INFO log, topology dump and graph dump in one directory, plus a
    cut XML file: findings come from the log and from both traces, and the cut file is one
    refusal line while everything else is read."""
    import shutil

    for rel in (
        "traces/graph_dump/panlichen_companion_nccl2.18.1_info.log",
        "traces/graph_dump/panlichen_8x_rtx3090_graph.xml",
        "traces/topo_dump/panlichen_8x_rtx3090_pcie_topo.xml",
    ):
        shutil.copy(FIXTURES / rel, tmp_path)
    (tmp_path / "cut.xml").write_text('<system version="1"><cpu numaid="0">')
    d = api.diagnose([str(tmp_path)])
    rules = {f.rule for f in d.findings}
    assert {"TOPO003", "GRAPH101", "TOPO102"} <= rules, rules
    kinds = {st.artifact for st in d.stats}
    assert kinds == {None, "graph-xml", "topo-xml"}
    assert [st.error for st in d.stats if st.error] == [
        f"{tmp_path / 'cut.xml'}: not well-formed XML (no element found: line 1, column 36)"
    ]


def _panlichen_job(tmp_path: Path) -> dict[str, bytes]:
    """The Panlichen job as archive members: its log, its graph dump, its topology dump
    gzipped (a member compressed on its own), and a cut XML file."""
    import gzip

    traces = FIXTURES / "traces"
    return {
        "job/rank0.log": (
            traces / "graph_dump/panlichen_companion_nccl2.18.1_info.log"
        ).read_bytes(),
        "job/graph.xml": (traces / "graph_dump/panlichen_8x_rtx3090_graph.xml").read_bytes(),
        "job/topo.xml.gz": gzip.compress(
            (traces / "topo_dump/panlichen_8x_rtx3090_pcie_topo.xml").read_bytes()
        ),
        "job/cut.xml": b'<system version="1"><cpu numaid="0">',
    }


@pytest.mark.parametrize("fmt", ["tar.gz", "tar.zst", "zip"])
def test_diagnose_an_archive_of_a_log_and_its_traces(tmp_path: Path, fmt: str) -> None:
    """The job of the directory test, in an archive named as nothing in particular: members are
    recognised by content, the traces read by their readers (not as log lines), and the
    findings are those of the directory."""
    import io
    import tarfile
    import zipfile

    import zstandard

    members = _panlichen_job(tmp_path)
    buf = io.BytesIO()
    if fmt == "zip":
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in members.items():
                zf.writestr(name, data)
        blob = buf.getvalue()
    else:
        with tarfile.open(fileobj=buf, mode="w") as tf:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
        import gzip

        raw = buf.getvalue()
        blob = gzip.compress(raw) if fmt == "tar.gz" else zstandard.compress(raw)
    archive = tmp_path / "upload.bin"
    archive.write_bytes(blob)
    d = api.diagnose([str(archive)])
    by_source = {st.source.split(":", 1)[1]: st for st in d.stats}
    assert {k: st.artifact for k, st in by_source.items()} == {
        "job/rank0.log": None,
        "job/graph.xml": "graph-xml",
        "job/topo.xml.gz": "topo-xml",
        "job/cut.xml": "topo-xml",
    }
    assert by_source["job/rank0.log"].unrecognized == 0
    assert by_source["job/topo.xml.gz"].records > 0
    assert by_source["job/cut.xml"].error is not None
    assert "not well-formed XML" in by_source["job/cut.xml"].error
    assert {"TOPO003", "GRAPH101", "TOPO102"} <= {f.rule for f in d.findings}
    [group] = api.group_paths([str(archive), str(FIXTURES / "traces/ras" / _RAS_1730)])
    assert group.evidence == ("an archive is read whole",)


def test_a_cut_archive_keeps_what_came_before_the_cut(tmp_path: Path) -> None:
    """An upload cut inside its log member: the traces before it are read, the log's lines up
    to the cut are parsed, and the cut is a note on the member and on the archive."""
    import gzip
    import io
    import tarfile

    members = _panlichen_job(tmp_path)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name in ("job/topo.xml.gz", "job/graph.xml", "job/rank0.log"):
            info = tarfile.TarInfo(name)
            info.size = len(members[name])
            tf.addfile(info, io.BytesIO(members[name]))
    blob = gzip.compress(buf.getvalue())
    archive = tmp_path / "job.tgz"
    archive.write_bytes(blob[:3000])
    d = api.diagnose([str(archive)])
    by_source = {st.source: st for st in d.stats}
    log = by_source[f"{archive}:job/rank0.log"]
    assert 0 < log.lines < 1000 and log.unrecognized <= 1  # the line the cut went through
    assert "input ends early or is corrupt" in log.damaged.summary()[0]
    assert "archive ends early" in by_source[str(archive)].damaged.summary()[0]
    assert by_source[f"{archive}:job/graph.xml"].records == 6


_RAS_1730 = "nccl-issue1730_ras_text_healthy_while_pytorch_timeout_2.26.2.txt"


@pytest.mark.parametrize("codec", ["gzip", "zstd", "xz", "bzip2"])
def test_a_compressed_artifact_on_stdin_is_recognised(codec: str) -> None:
    """`zstd -c topo.xml | ncclscope diagnose -`: the pipe is peeked at, decompressed there, and
    the artifact read by its reader (a log on stdin is read as before)."""
    import bz2
    import gzip
    import json
    import lzma
    import subprocess
    import sys

    import zstandard

    compress = {
        "gzip": gzip.compress,
        "zstd": zstandard.compress,
        "xz": lzma.compress,
        "bzip2": bz2.compress,
    }[codec]
    fault = FIXTURES / "traces/topo_dump/timez-zx_a100pcie_nvlink_fault_topo_dump.xml"
    run = subprocess.run(
        [sys.executable, "-m", "ncclscope", "diagnose", "-", "--format", "json"],
        input=compress(fault.read_bytes()),
        capture_output=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["sources"][0]["artifact"] == "topo-xml"
    assert [f["rule"] for f in doc["findings"]] == ["TOPO101"]


def test_archives_are_found_by_content(tmp_path: Path) -> None:
    import io
    import tarfile

    from ncclscope.parse.reader import archive_format

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz") as tf:
        info = tarfile.TarInfo("a.log")
        tf.addfile(info, io.BytesIO(b""))
    (tmp_path / "logs.txt").write_bytes(buf.getvalue())
    assert archive_format(tmp_path / "logs.txt") == "tar"
    log = FIXTURES / "traces/nccl_tests/odissei_h100_1node_4gpu_all_reduce.log"
    assert archive_format(log) is None
    assert archive_format(FIXTURES / "traces/topo_file/aws_p5.48xl-topo.xml") is None


def test_an_archive_on_stdin_is_read_as_its_members(tmp_path: Path) -> None:
    """``tar cz logs/ | ncclscope diagnose -`` (a pod's logs copied out with ``kubectl exec …
    tar``): the archive is found by its content on stdin too, and read as the members would be
    as files; a zip, which needs its end first, is refused in one line (exit 2)."""
    import io
    import json
    import subprocess
    import sys
    import tarfile
    import zipfile

    logs = [next(REAL.glob(f"{n}-*.log")) for n in ("002", "227")]
    tgz, zipped = io.BytesIO(), io.BytesIO()
    with tarfile.open(fileobj=tgz, mode="w:gz") as tf:
        for log in logs:
            tf.add(log, arcname=f"logs/{log.name}")
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.write(logs[0], arcname=logs[0].name)

    def diagnose(*args: str, data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        argv = [sys.executable, "-m", "ncclscope", "diagnose", "--format", "json", *args]
        return subprocess.run(argv, input=data, capture_output=True, check=False)

    folder = tmp_path / "logs"
    folder.mkdir()
    for log in logs:
        (folder / log.name).write_bytes(log.read_bytes())
    piped = diagnose("-", data=tgz.getvalue())
    files = diagnose(str(folder))
    assert piped.returncode == files.returncode == 1, piped.stderr
    got, want = json.loads(piped.stdout), json.loads(files.stdout)
    assert [s["source"] for s in got["sources"]] == [f"-:logs/{log.name}" for log in logs]
    assert [f["rule"] for f in got["findings"]] == [f["rule"] for f in want["findings"]]
    assert got["sources"][1]["typed"] == want["sources"][1]["typed"] > 0
    refused = diagnose("-", data=zipped.getvalue())
    assert refused.returncode == 2 and refused.stderr.decode().count("\n") == 1
    assert b"zip archive must be a file" in refused.stderr


# -- pictures ----------------------------------------------------------------------------------


def _cli(*args: str) -> str:
    from click.testing import CliRunner

    from ncclscope.cli import main

    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_topo_draws_the_topology_and_graph_xml() -> None:
    fault = str(FIXTURES / "traces/topo_dump/timez-zx_a100pcie_nvlink_fault_topo_dump.xml")
    graph = str(FIXTURES / "traces/graph_dump/panlichen_8x_rtx3090_graph.xml")
    text = _cli("topo", fault, graph)
    assert "NVLink GPU 0 -> GPU 1: 1 link(s) / 12 back  <-- asymmetric" in text
    assert "NIC 0000:4b:00.0: mlx5_0 100 Gb/s gdr=0" in text
    assert "channel 0: NET0 -> GPU0 -> GPU1" in text
    dot = _cli("topo", "--format", "dot", fault, graph)
    assert dot.startswith("digraph") and dot.count("{") == dot.count("}")
    assert 'color=red, label="NVL x1/12"' in dot


def test_topo_draws_switch_trees() -> None:
    l20 = str(FIXTURES / "traces/topo_dump/zy-uestc_8x_l20_topo.xml")
    text = _cli("topo", l20)
    assert "    PCIe switch 0000:0f:02.0 [32 GT/s x16]\n      PCIe switch 0000:0e:00.0" in text


def test_bandwidth_chart_against_the_links() -> None:
    slow = str(FIXTURES / "documented/nccl_tests/all_reduce_8xv100_slow.json")
    graph = str(FIXTURES / "traces/graph_dump/blinkplus_8gpu_nvlink_graph.xml")
    insp = str(FIXTURES / "traces/inspector/sugarlxn_baseline_allgather_4x4090_rank0.jsonl")
    svg = _cli("bandwidth", slow, graph, insp)
    assert svg.startswith("<svg") and svg.count("<polyline") == 2
    assert "links: 132 GB/s" in svg
    md = _cli("bandwidth", "--format", "markdown", slow, graph)
    assert "| 128 MiB | 39.6 | 30% |" in md
    ticket = _cli("diagnose", "--format", "markdown", "--fail-on", "never", slow, graph)
    assert "## Bandwidth" in ticket and "| 128 MiB | 39.6 | 30% |" in ticket


def test_capped_lines_keep_numbering_across_skipped_lines() -> None:
    import io

    from ncclscope.traces.safe import TraceLimits, iter_capped_lines

    skipped: list[tuple[int, int]] = []
    data = b"a\r\nbb\n" + b"x" * 25 + b"\nccc\n\nlast"
    lines = list(
        iter_capped_lines(
            io.BytesIO(data), TraceLimits(max_line_bytes=10), lambda n, s: skipped.append((n, s))
        )
    )
    assert lines == [(1, b"a"), (2, b"bb"), (4, b"ccc"), (5, b""), (6, b"last")]
    assert skipped == [(3, 25)]


def test_an_artifact_piped_on_stdin_is_recognised() -> None:
    import subprocess
    import sys

    fault = FIXTURES / "traces/topo_dump/timez-zx_a100pcie_nvlink_fault_topo_dump.xml"
    run = subprocess.run(
        [sys.executable, "-m", "ncclscope", "diagnose", "-", "--format", "json"],
        input=fault.read_bytes(),
        capture_output=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    import json

    doc = json.loads(run.stdout)
    assert doc["sources"][0]["artifact"] == "topo-xml"
    assert [f["rule"] for f in doc["findings"]] == ["TOPO101"]


def test_ras_text_detail_lines_of_every_shape_nccl_prints(tmp_path: Path) -> None:
    """The rank and error lines of RAS's text report in the shapes NCCL's client_support.cc
    prints them (2.26+): a GPU numbered differently by CUDA and NVML, a rank with no operation, a
    rank whose process is not found, an error most ranks share; an indented line of an unknown
    shape is kept as unrecognised, not dropped as noise."""
    report = tmp_path / "ras.txt"
    report.write_text(
        "Communicators... (0.00s)\n=============\n\n"
        "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
        "    #  in group  per comm  per node  per comm  in group\n"
        "    0         1         2         4         8         8   RUNNING  MISMATCH,ERROR\n\n"
        "Errors\n======\n\n"
        "#0-0 (78db921d1c117b4a) ERROR\n"
        "  3 ranks reported unhandled cuda error (run with NCCL_DEBUG=INFO for details)\n"
        "  Rank 1 -- GPU 1 (NVML 3) managed by process 4101 on node 10.0.0.1\n"
        "  Rank 5 reported remote process exited or there was a network error -- "
        "GPU 1 managed by process 4105 on node 10.0.0.2\n\n"
        "Warnings\n========\n\n"
        "#0-0 (78db921d1c117b4a) MISMATCH\n"
        "  Communicator ranks have different AllReduce operation counts\n"
        "  6 ranks have launched up to operation 64\n"
        "  Rank 7 has launched up to operation 60 -- GPU 3 managed by process 4107 on node node1\n"
        "  Rank 4 has not launched any operations -- [process information not found]\n"
        "  Rank 2 has launched up to operation 27890 -- GPU 0, process 284, node 10.0.0.1\n"
    )
    read = read_trace(str(report), ArtifactKind.RAS_TEXT)
    issues = [r for r in read.records if isinstance(r, RasIssue)]
    got = {(r.what, r.rank): (r.gpu, r.process, r.op_count, r.how_many, r.detail) for r in issues}
    assert got[("reported", None)] == (
        None,
        None,
        None,
        3,
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
    )
    assert got[("rank", 1)] == ("1 (NVML 3)", 4101, None, None, None)
    assert got[("rank", 5)][3:] == (None, "remote process exited or there was a network error")
    assert got[("rank", 7)][:3] == ("3", 4107, 60)
    assert got[("rank", 4)] == (None, None, 0, None, None)
    [odd] = [r for r in read.records if isinstance(r, Unrecognized)]
    assert "process 284, node" in odd.text
    d = api.diagnose([str(report)], select=["RAS102"])
    [gap] = d.findings
    assert "rank(s) 4 launched up to operation 0 while others reached 64" in gap.message
