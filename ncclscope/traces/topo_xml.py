"""Topology XML: what ``NCCL_TOPO_DUMP_FILE`` writes and ``NCCL_TOPO_FILE`` reads.

``<system version="1">`` › ``cpu`` › nested ``pci`` (switches) › ``gpu`` › ``nvlink``/``c2c``, and
``nic`` › ``net`` under a ``pci`` or straight under the ``cpu``. Input files shipped by clouds
are partial (bare ``pci`` elements, no ``gpu``/``nic``, comments): every element is optional.
Each element becomes one record that names the PCI device and CPU it sits under, so a rule can
ask which root port and NUMA node a GPU and a NIC share without walking the tree again.
"""

from __future__ import annotations

import re
from typing import Any

from ncclscope.model.records.traces import (
    TopoXmlC2c,
    TopoXmlCpu,
    TopoXmlGpu,
    TopoXmlNet,
    TopoXmlNvlink,
    TopoXmlPci,
    TopoXmlSystem,
)
from ncclscope.traces.base import TraceRead, to_float, to_int
from ncclscope.traces.safe import XmlElement, parse_xml
from ncclscope.traces.sniff import ArtifactKind

_GTS = re.compile(r"([\d.]+)\s*GT/s")
#: ``net`` attributes every NCCL version writes; the rest (2.23+: coll, gin, rma…) go to ``extra``
_NET_KNOWN = {"name", "dev", "speed", "latency", "port", "guid", "maxconn", "gdr"}
_CONTAINERS = {"nic"}


def read_topo_xml(data: bytes, read: TraceRead) -> None:
    """Records of a topology file into ``read``."""
    elements = parse_xml(data, read.source, read.limits)
    lines = data.decode("utf-8", errors="replace").split("\n")
    read.lines = len(lines) - (1 if lines and lines[-1] == "" else 0)
    cpu_index = -1
    for i, el in enumerate(elements):
        env: dict[str, Any] = {
            "source": read.source,
            "line": el.line,
            "text": lines[el.line - 1].rstrip("\r") if el.line <= len(lines) else "",
            "artifact": ArtifactKind.TOPO_XML.value,
        }
        a = el.attrs
        chain = _ancestors(elements, i)
        cpu = next((e for e in chain if e.name == "cpu"), None)
        pcis = [e for e in chain if e.name == "pci"]
        numaid = to_int(cpu.attrs.get("numaid")) if cpu is not None else None
        if el.name == "system" and el.parent == -1:
            read.version = a.get("version")
            read.add(TopoXmlSystem(**env, version=a.get("version")))
        elif el.name == "cpu":
            cpu_index += 1
            read.add(
                TopoXmlCpu(
                    **env,
                    numaid=to_int(a.get("numaid")),
                    affinity=a.get("affinity"),
                    arch=a.get("arch"),
                    vendor=a.get("vendor"),
                    familyid=to_int(a.get("familyid")),
                    modelid=to_int(a.get("modelid")),
                    host_hash=a.get("host_hash"),
                )
            )
        elif el.name == "pci":
            speed = a.get("link_speed") or None
            gts = _GTS.search(speed) if speed else None
            read.add(
                TopoXmlPci(
                    **env,
                    busid=a.get("busid", ""),
                    pci_class=a.get("class"),
                    vendor=a.get("vendor"),
                    device=a.get("device"),
                    link_speed=speed,
                    link_gts=float(gts.group(1)) if gts else None,
                    link_width=to_int(a.get("link_width")),
                    parent_busid=pcis[0].attrs.get("busid") if pcis else None,
                    root_busid=(pcis[-1] if pcis else el).attrs.get("busid", ""),
                    numaid=numaid,
                    cpu_index=max(cpu_index, 0),
                )
            )
        elif el.name == "gpu":
            read.add(
                TopoXmlGpu(
                    **env,
                    busid=pcis[0].attrs.get("busid") if pcis else None,
                    root_busid=pcis[-1].attrs.get("busid") if pcis else None,
                    cuda_dev=to_int(a.get("dev")),
                    sm=to_int(a.get("sm")),
                    rank=to_int(a.get("rank")),
                    gdr=to_int(a.get("gdr")),
                    numaid=numaid,
                    cpu_index=max(cpu_index, 0),
                )
            )
        elif el.name == "nvlink" and chain and chain[0].name == "gpu":
            gpu = chain[0].attrs
            read.add(
                TopoXmlNvlink(
                    **env,
                    busid=pcis[0].attrs.get("busid") if pcis else None,
                    cuda_dev=to_int(gpu.get("dev")),
                    sm=to_int(gpu.get("sm")),
                    target=a.get("target", ""),
                    count=to_int(a.get("count")),
                    tclass=a.get("tclass"),
                )
            )
        elif el.name == "c2c" and chain and chain[0].name == "gpu":
            read.add(
                TopoXmlC2c(
                    **env,
                    busid=pcis[0].attrs.get("busid") if pcis else None,
                    count=to_int(a.get("count")),
                    bw=to_float(a.get("bw")),
                )
            )
        elif el.name == "net" and chain and chain[0].name == "nic":
            read.add(
                TopoXmlNet(
                    **env,
                    name=a.get("name", ""),
                    net_dev=to_int(a.get("dev")),
                    speed_mbps=to_int(a.get("speed")),
                    latency=to_float(a.get("latency")),
                    port=to_int(a.get("port")),
                    guid=a.get("guid"),
                    maxconn=to_int(a.get("maxconn")),
                    gdr=to_int(a.get("gdr")),
                    busid=pcis[0].attrs.get("busid") if pcis else None,
                    root_busid=pcis[-1].attrs.get("busid") if pcis else None,
                    numaid=numaid,
                    cpu_index=max(cpu_index, 0),
                    extra=tuple(sorted(f"{k}={v}" for k, v in a.items() if k not in _NET_KNOWN)),
                )
            )
        elif el.name in _CONTAINERS and chain:
            continue
        else:
            read.unknown(env["line"], env["text"], f"topology element <{el.name}> not known")


def _ancestors(elements: list[XmlElement], i: int) -> list[XmlElement]:
    """The enclosing elements of element ``i``, innermost first."""
    out: list[XmlElement] = []
    parent = elements[i].parent
    while parent != -1:
        out.append(elements[parent])
        parent = elements[parent].parent
    return out
