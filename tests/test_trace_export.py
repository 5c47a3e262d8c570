"""The trace tables of the Parquet dataset: written by export, read back by ncclscope.load."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

import ncclscope
from ncclscope.export.schemas import TABLES, TRACE_TABLES
from tests.helpers import FIXTURES


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> ncclscope.export.load.Dataset:
    job = tmp_path_factory.mktemp("job")
    for rel in (
        "traces/graph_dump/panlichen_companion_nccl2.18.1_info.log",
        "traces/graph_dump/panlichen_8x_rtx3090_graph.xml",
        "traces/topo_dump/panlichen_8x_rtx3090_pcie_topo.xml",
        "traces/profiler_example/pha-Z_nccl2.28_p2p_trace_excerpt.json",
        "traces/ras/nccl-issue1762_ras_text_outlier_incomplete_nocomm_2.27.3.txt",
        "documented/flight_recorder/nccl_trace_rank_0",
        "documented/flight_recorder/nccl_trace_rank_1",
        "documented/nccl_tests/all_reduce_8xh100_wrong_results.json",
    ):
        shutil.copy(FIXTURES / rel, job)
    (job / "cut.xml").write_text('<system version="1">')
    out = tmp_path_factory.mktemp("out")
    from click.testing import CliRunner

    from ncclscope.cli import main

    result = CliRunner().invoke(main, ["export", str(job), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return ncclscope.load(out)


def test_every_trace_table_has_its_schema(dataset: ncclscope.export.load.Dataset) -> None:
    for table in TRACE_TABLES:
        frame = dataset[table.name].collect()
        assert frame.columns == table.names, table.name
        assert TABLES[table.name] is table


def test_trace_facts_are_in_the_tables(dataset: ncclscope.export.load.Dataset) -> None:
    nodes = dataset["topology_nodes"].collect()
    gpus = nodes.filter(pl.col("node") == "gpu")
    assert gpus.height == 8 and set(gpus["numaid"].to_list()) == {0, 1}
    assert nodes.filter(pl.col("node") == "net")["name"].to_list() == ["mlx5_0"]
    chans = dataset["graph_channels"].collect()
    assert chans.filter(pl.col("graph_id") == 0)["gpus"].to_list() == [[0, 1, 2, 3, 4, 5, 6, 7]]
    assert set(chans["typeinter"].to_list()) == {"SYS"}
    bench = dataset["benchmark_results"].collect()
    assert bench.filter(pl.col("in_wrong") > 0)["size"].to_list() == [134217728]
    prof = dataset["collective_timings"].collect().filter(pl.col("tool") == "profiler")
    assert prof["op"].to_list() == ["Send", "Recv"] and prof["nchannels"].to_list() == [16, 16]
    ras = dataset["ras_states"].collect()
    assert ras.filter(pl.col("what") == "group")["status"].to_list() == [
        "RUNNING",
        "RUNNING",
        "NOCOMM",
    ]
    fr = dataset["flight_recorder_entries"].collect()
    seq3 = fr.filter(pl.col("collective_seq_id") == 3).sort("rank")
    assert seq3["profiling_name"].to_list() == ["nccl:all_reduce", "nccl:broadcast"]


def test_sources_name_the_artifacts_and_the_refused_one(
    dataset: ncclscope.export.load.Dataset,
) -> None:
    src = dataset["sources"].collect()
    kinds = {Path(s).name: a for s, a in zip(src["source"], src["artifact"], strict=True)}
    assert kinds["panlichen_companion_nccl2.18.1_info.log"] is None
    assert kinds["nccl_trace_rank_0"] == "flight-recorder"
    cut = src.filter(pl.col("source").str.ends_with("cut.xml"))
    assert cut["status"].to_list() == ["error"] and "not well-formed" in cut["error"][0]
    findings = dataset["findings"].collect()["rule"].to_list()
    assert {"FR101", "TEST101", "GRAPH101", "RAS101"} <= set(findings)


def test_an_archive_of_a_log_and_its_traces_exports_its_traces(tmp_path: Path) -> None:
    """Members of a tar.gz are read by content as in a directory: the topology dump (gzipped
    inside the archive) and the graph dump fill their tables, not the records of a log."""
    import gzip
    import io
    import tarfile

    from click.testing import CliRunner

    from ncclscope.cli import main

    traces = FIXTURES / "traces"
    members = {
        "job/rank0.log": (traces / "graph_dump/panlichen_companion_nccl2.18.1_info.log"),
        "job/graph.xml": (traces / "graph_dump/panlichen_8x_rtx3090_graph.xml"),
        "job/topo.xml.gz": (traces / "topo_dump/panlichen_8x_rtx3090_pcie_topo.xml"),
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, path in members.items():
            data = path.read_bytes()
            data = gzip.compress(data) if name.endswith(".gz") else data
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    archive = tmp_path / "job.tar.gz"
    archive.write_bytes(buf.getvalue())
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["export", str(archive), "-o", str(out)])
    assert result.exit_code == 0, result.output
    ds = ncclscope.load(out)
    src = ds["sources"].collect()
    kinds = dict(zip(src["member"], src["artifact"], strict=True))
    assert kinds == {
        "job/rank0.log": None,
        "job/graph.xml": "graph-xml",
        "job/topo.xml.gz": "topo-xml",
    }
    gpus = ds["topology_nodes"].collect().filter(pl.col("node") == "gpu")
    assert gpus.height == 8
    assert ds["graph_channels"].collect().height > 0
    assert {"GRAPH101", "TOPO003"} <= set(ds["findings"].collect()["rule"].to_list())
