"""Fabric identification per host (ncclscope.model.fabric) on real logs, and what it changes in
the findings: on a fabric reached only through a net plugin, IB finding nothing is expected and
the remediation names the plugin."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ncclscope import api
from ncclscope.cli import main
from ncclscope.model.fabric import Fabric, host_fabrics
from tests.helpers import REAL

#: log → (host, fabric, NCCL's networks there, whether the fabric's plugin is missing)
EXPECTED: dict[str, tuple[str, Fabric, set[str], bool]] = {
    "200-lumi-slingshot-rccl-ofi-plugin-missing-socket.log": (
        "nid007971",
        Fabric.SLINGSHOT,
        {"Socket"},
        True,
    ),
    "long/L04-eks-p4d-efa-mpirun-2.9.log": (
        "nccl-tests-efa-16-worker-0",
        Fabric.EFA,
        {"OFI"},
        False,
    ),
    "long/L06-jeanzay-a100-omnipath-4node-2.10.log": (
        "jean-zay-iam37",
        Fabric.OMNIPATH,
        {"IB"},
        False,
    ),
    "long/L03-vllm-ray-2node-ib-gdrdma-2.21.log": (
        "deepseek-v2-5-0",
        Fabric.INFINIBAND,
        {"IB"},
        False,
    ),
    "long/L01-sglang-2node-roce-gdrdma-2.29.log": ("tpgds-aihub0003", Fabric.ROCE, {"IB"}, False),
    "long/L05-cori-shifter-no-ib-socket-2.5.log": ("cgpu15", Fabric.IPOIB, {"Socket"}, False),
    "051-gcp-a3-gpudirecttcpx-rx-timeout.log": ("?", Fabric.TCPX, set(), False),
    "033-socket-multinode-slow.log": ("gpu1", Fabric.ETHERNET, {"Socket"}, False),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_host_fabric(name: str) -> None:
    host, fabric, networks, missing = EXPECTED[name]
    job, _stats = api.build([REAL / name])
    fabrics = host_fabrics(job)
    hf = fabrics.get(host) or next(iter(fabrics.values()))
    assert hf.fabric is fabric, (name, {h: f.describe() for h, f in fabrics.items()})
    assert set(hf.networks) == networks
    assert hf.plugin_missing is missing


def test_efa_asked_for_but_not_found() -> None:
    """p3dn: aws-ofi-nccl says only EFA is supported and NCCL falls back to sockets on ens5:
    the host's fabric is EFA (asked for), not the Ethernet interface every node has."""
    log = REAL / "214-p3dn-ofi-only-efa-provider-socket-fallback.log"
    job, _stats = api.build([log])
    hf = host_fabrics(job)["ip-172-31-0-112"]
    assert hf.fabric is Fabric.EFA and Fabric.EFA not in hf.shown
    assert "asked for" in hf.describe()


def test_slingshot_findings_name_the_ofi_plugin_not_ibstat() -> None:
    d = api.diagnose([REAL / "200-lumi-slingshot-rccl-ofi-plugin-missing-socket.log"])
    by_rule = {f.rule: f for f in d.findings}
    assert "NET016" in by_rule
    for rule in ("NET016", "NET001", "NET005", "NET006"):
        assert "OFI" in by_rule[rule].remediation, rule
        assert "ibstat" not in by_rule[rule].remediation, rule
    assert by_rule["NET005"].severity.value == "info"
    assert any("HPE Slingshot" in line for line in d.summary.fabrics)


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_fabric_in_every_diagnose_format(fmt: str) -> None:
    log = REAL / "long" / "L06-jeanzay-a100-omnipath-4node-2.10.log"
    out = CliRunner().invoke(main, ["diagnose", str(log), "--format", fmt, "--fail-on", "never"])
    assert out.exit_code == 0, out.output
    if fmt == "json":
        summary = json.loads(out.output)["summary"]
        assert ["jean-zay-iam37", "Omni-Path"] in summary["fabric_by_host"]
        assert summary["fabrics"][0].startswith("Omni-Path")
    else:
        assert "Fabric: Omni-Path" in out.output


def test_every_fabric_has_a_fix_naming_what_it_needs() -> None:
    for fabric in Fabric:
        assert fabric.fix
    assert {f for f in Fabric if f.needs_plugin} == {
        Fabric.SLINGSHOT,
        Fabric.EFA,
        Fabric.TCPX,
        Fabric.TCPXO,
    }
