"""``ncclscope diff``: two real jobs lined up, and one job's hosts against each other.

The corpus holds no healthy/broken twin of one cluster (L05's bare-metal twin L07 and L03's
socket twin L14 are not in it), so the pair is two real multi-node jobs (Jean Zay over Omni-Path,
Cori over TCP in a container), and the outlier host is made the way the issue allows: a real log
(L06, four hosts) with one host's lines replaced by a host of another real log (L05's cgpu16).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ncclscope import api
from ncclscope.cli import main
from ncclscope.model.connections import connections, transport_class
from ncclscope.model.enums import Transport
from ncclscope.model.job import Job
from ncclscope.model.profile import INTER, INTRA, UNPLACED, Profile, host_profiles, profile
from ncclscope.model.views import views
from tests.helpers import CASES, REAL, real_logs

GOOD = REAL / "long" / "L06-jeanzay-a100-omnipath-4node-2.10.log"
BAD = REAL / "long" / "L05-cori-shifter-no-ib-socket-2.5.log"


def _mixed(tmp_path: Path) -> Path:
    """L06 without jean-zay-iam52, plus every line L05's cgpu16 printed."""
    keep = [
        line
        for line in GOOD.read_text(encoding="utf-8").splitlines()
        if "jean-zay-iam52:" not in line
    ]
    keep += [line for line in BAD.read_text(encoding="utf-8").splitlines() if "cgpu16:" in line]
    out = tmp_path / "mixed.log"
    out.write_text("\n".join(keep) + "\n", encoding="utf-8")
    return out


def test_good_against_bad_names_what_matters() -> None:
    c = api.diff([GOOD], [BAD])
    changes = {(ch.fact, ch.detail): ch for ch in c.changes}
    assert changes[("network", "")].good == "IB" and changes[("network", "")].bad == "Socket"
    assert changes[("fabric", "")].bad == "IPoIB"
    inter = changes[("inter-node transports", "")]
    assert inter.good.startswith("NET/IB") and inter.bad.startswith("NET/Socket")
    assert changes[("NCCL version", "")].bad == "2.5.6+cuda10.2"
    assert inter.good_line is not None and "via NET/IB" in inter.good_line.text
    assert inter.bad_line is not None and "via NET/Socket" in inter.bad_line.text
    # the most telling changes come first
    facts = [ch.fact for ch in c.changes]
    assert facts.index("network") < facts.index("channels")
    assert "NET001" in {f.rule for f in c.new_findings}
    assert c.outliers == []


def test_a_job_against_itself_changes_nothing() -> None:
    c = api.diff([GOOD], [GOOD])
    assert c.changes == [] and c.new_findings == [] and c.gone_findings == []


def test_outlier_host_in_a_multi_node_log(tmp_path: Path) -> None:
    c = api.diff(None, [_mixed(tmp_path)])
    assert c.good is None and c.changes == []
    flagged = {o.host for o in c.outliers}
    assert flagged == {"cgpu16"}
    facts = {o.fact: o for o in c.outliers}
    for fact in ("fabric", "network", "interfaces", "inter-node transports"):
        assert fact in facts, (fact, sorted(facts))
    assert facts["network"].value == "Socket" and facts["network"].majority == "IB"
    assert facts["network"].agreeing == 3
    assert facts["network"].line is not None and "cgpu16" in facts["network"].line.text


def test_good_against_a_job_with_one_bad_host(tmp_path: Path) -> None:
    c = api.diff([GOOD], [_mixed(tmp_path)])
    network = next(ch for ch in c.changes if ch.fact == "network")
    assert (network.good, network.bad) == ("IB", "IB, Socket")
    assert {o.host for o in c.outliers} == {"cgpu16"}


@pytest.mark.parametrize(
    "log",
    [
        GOOD,
        REAL / "long" / "L04-eks-p4d-efa-mpirun-2.9.log",
        REAL / "long" / "L03-vllm-ray-2node-ib-gdrdma-2.21.log",
        REAL / "036-aws-many-nodes-socket-2.4.log",
        REAL / "065-ib-2node-init-complete-2coll.log",
    ],
    ids=lambda p: p.name[:3],
)
def test_consistent_real_jobs_have_no_outlier(log: Path) -> None:
    """False-alarm check: hosts of one real job that printed fewer lines are not outliers."""
    assert api.diff(None, [log]).outliers == []


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_cli_formats(fmt: str, tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["diff", str(GOOD), str(_mixed(tmp_path)), "--format", fmt])
    assert out.exit_code == 0, out.output
    if fmt == "json":
        data = json.loads(out.output)
        assert data["schema_version"] == 1
        assert any(ch["fact"] == "network" for ch in data["changes"])
        assert {o["host"] for o in data["outliers"]} == {"cgpu16"}
        assert data["good"]["summary"]["hosts"]
    elif fmt == "markdown":
        assert out.output.startswith("# NCCL diff")
        assert "| network | IB | IB, Socket |" in out.output
        assert "cgpu16" in out.output
    else:
        assert "network: IB → IB, Socket" in out.output
        assert "cgpu16: network is Socket; the other 3 host(s): IB" in out.output


def test_cli_one_job_and_a_directory(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    _mixed(job)
    out = CliRunner().invoke(main, ["diff", str(job)])
    assert out.exit_code == 0, out.output
    assert "Hosts that differ from the others (1 of 4)" in out.output


def test_cli_errors_are_one_line() -> None:
    runner = CliRunner()
    out = runner.invoke(main, ["diff", "a", "b", "c"])
    assert out.exit_code == 2 and out.output.count("\n") == 1
    out = runner.invoke(main, ["diff", "/nonexistent/good.log", str(GOOD)])
    assert out.exit_code == 2 and "Traceback" not in out.output


def test_settings_outliers_are_the_majoritys_whether_or_not_most_hosts_set_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A setting most hosts leave unset is read without a value per host (a big job has
    thousands of hosts and hundreds of settings); the outliers are the ones the whole table
    gives. The settings are plain values here: what is tested is the reading of the table."""
    from ncclscope.model import compare
    from ncclscope.model.profile import Profile

    printed = {
        "NCCL_DEBUG": {h: "INFO" for h in "abcde"},
        "NCCL_SOCKET_IFNAME": {"a": "eth0", "b": "eth0", "c": "eth0", "d": "eth0", "e": "ib0"},
        "NCCL_IB_HCA": {"c": "mlx5_0"},
        "NCCL_ALGO": {"a": "Ring", "b": "Ring"},
        "NCCL_PROTO": {"a": "LL", "b": "Simple", "c": "LL"},
        "NCCL_NET": {"a": "IB", "b": "Socket"},
    }
    profiles = {h: Profile(h) for h in "abcdef"}  # f sets nothing: not a setter
    for name, by_host in printed.items():
        for host, value in by_host.items():
            profiles[host].settings[name] = {value}
    monkeypatch.setattr(compare, "host_profiles", lambda job, only=None: profiles)

    setters = {h: p for h, p in profiles.items() if p.settings}
    want = []
    for name in sorted(printed):
        table: dict[str, frozenset[str] | None] = {
            h: frozenset(p.settings.get(name, {"not set"})) for h, p in setters.items()
        }
        want += compare._odd("setting", name, table, profiles, f"settings:{name}")
    got = [o for o in compare.outliers(api.build([])[0]) if o.fact == "setting"]
    assert sorted(got, key=compare.Outlier.sort_key) == sorted(want, key=compare.Outlier.sort_key)
    assert {(o.detail, o.host) for o in got} == {
        ("NCCL_SOCKET_IFNAME", "e"),
        ("NCCL_IB_HCA", "c"),
        ("NCCL_ALGO", "a"),
        ("NCCL_ALGO", "b"),
        ("NCCL_NET", "a"),
        ("NCCL_NET", "b"),
    }


def test_outliers_of_some_facts_are_those_facts_outliers(tmp_path: Path) -> None:
    """A rule that compares a few facts across hosts (NET018) asks for them alone: each host's
    profile then holds only those, and the outliers are the ones the whole comparison gives for
    them. Jobs: every real excerpt as one (102 hosts), the benchmark's init-heavy log (207
    renamed hosts) and the mixed L06 (one host from another cluster)."""
    from ncclscope.model.compare import outliers

    from .helpers import synth

    init = tmp_path / "init.log"
    synth().write_init_heavy(init, 1_500_000, REAL)
    jobs = [sorted(REAL.glob("*.log")), [init], [_mixed(tmp_path)]]
    seen: set[str] = set()
    for paths in jobs:
        job, _stats = api.build(paths)
        every = outliers(job)
        seen |= {o.fact for o in every}
        for some in (("network", "net plugin", "fabric"), ("setting", "channels"), ("init time",)):
            assert outliers(job, facts=some) == [o for o in every if o.fact in some], some
    assert {"network", "net plugin", "fabric", "setting", "channels", "init time"} <= seen


def _transports_one_by_one(
    job: Job, host: str | None
) -> tuple[dict[str, Counter[str]], dict[str, tuple[str, int]]]:
    """A profile's transports read a connection record at a time: its peer class from its
    transport and ``crosses_nodes``, its lines counted, the first of each class kept."""
    v = views(job)
    counts: dict[str, Counter[str]] = {}
    first: dict[str, tuple[str, int]] = {}
    for conn in connections(job).records():
        if host is not None and conn.host != host:
            continue
        crosses = v.crosses_nodes(conn)
        if conn.transport in (Transport.P2P, Transport.SHM, Transport.NVLS) or crosses is False:
            peer = INTRA
        elif crosses is None and conn.transport is not Transport.NET:
            peer = UNPLACED
        else:
            peer = INTER
        first.setdefault(peer, (conn.source, conn.line))
        counts.setdefault(peer, Counter())[transport_class(conn)] += len(conn.printed_lines)
    return counts, first


@pytest.mark.parametrize("log", [str(p.relative_to(REAL)) for p in real_logs()])
def test_profile_transports_are_what_each_connection_record_says(log: str) -> None:
    """A profile's transports (the job's, and each host's) come from group-bys on the
    connection table: the counts, their order and each class's first connection as placing
    every record one at a time gives them."""
    job = api.build([REAL / log])[0]

    def got(p: Profile) -> tuple[list[Any], dict[str, tuple[str, int]]]:
        evidence = {
            k.partition(":")[2]: (r.source, r.line)
            for k, r in p.evidence.items()
            if k.startswith("transports:")
        }
        return [(peer, list(c.items())) for peer, c in p.transports.items()], evidence

    def want(host: str | None) -> tuple[list[Any], dict[str, tuple[str, int]]]:
        counts, first = _transports_one_by_one(job, host)
        return [(peer, list(c.items())) for peer, c in counts.items()], first

    assert got(profile(job, "job")) == want(None)
    for host, p in host_profiles(job).items():
        assert got(p) == want(host), host


def test_profile_transports_of_the_rule_cases(tmp_path: Path) -> None:
    """The same, on every rule case's log (tests/cases/rules): the shapes the fixtures lack,
    NET between ranks of one host among them (P2P006)."""
    import yaml

    cases = [
        (f"{path.stem}: {case['name']}", case["log"])
        for path in sorted((CASES / "rules").glob("*.yaml"))
        for case in yaml.safe_load(path.read_text(encoding="utf-8"))["cases"]
        if "log" in case
    ]
    assert len(cases) > 100
    intra_net = 0
    for k, (name, text) in enumerate(cases):
        log = tmp_path / f"{k}.log"
        log.write_text(text, encoding="utf-8")
        job = api.build([log])[0]
        for host in (None, *job.hosts):
            p = profile(job, "job") if host is None else host_profiles(job)[host]
            counts, first = _transports_one_by_one(job, host)
            assert {peer: list(c.items()) for peer, c in p.transports.items()} == {
                peer: list(c.items()) for peer, c in counts.items()
            }, name
            assert {
                k.partition(":")[2]: (r.source, r.line)
                for k, r in p.evidence.items()
                if k.startswith("transports:")
            } == first, name
        inside = profile(job, "job").transports.get(INTRA, Counter())
        intra_net += any(cls.startswith("NET/") for cls in inside)
    assert intra_net, "no rule case has NET inside a host"
