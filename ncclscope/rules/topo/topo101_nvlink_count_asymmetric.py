"""TOPO101 ``nvlink-count-asymmetric``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.traces import TopoXmlNvlink
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.topo._shared import _bus_int


def _check_nvlink_asymmetry(job: Job) -> Iterator[Finding]:
    """
    What it detects
        NVLinks that do not add up in a topology XML (NCCL_TOPO_DUMP_FILE): a GPU pair whose link
        counts differ between the two directions (GPU 0 sees 1 link to GPU 1, GPU 1 sees 12),
        or a GPU with fewer NVLinks to the NVSwitches than the other GPUs of the same kind.

    Why it matters
        NCCL sizes the NVLink bandwidth of a path as links × the per-link speed of the
        architecture. A link that is down on one side (a failed link, a GPU reset, a fabric
        manager fault) makes NCCL pick a slower ring or route over PCIe, and the job runs at a
        fraction of its speed with no error.

    Evidence it needs
        A topology XML with ``<nvlink target=… count=…>`` elements (NCCL_TOPO_DUMP_FILE).

    What to do
        Check ``nvidia-smi nvlink -s`` and ``nvidia-smi topo -m`` on the host, the fabric manager
        status on NVSwitch systems, and reset or replace the GPU whose links are missing.
    """
    by_file: dict[str, list[TopoXmlNvlink]] = defaultdict(list)
    for link in job.of(TopoXmlNvlink):
        by_file[link.source].append(link)
    for links in by_file.values():
        pair = {(_bus_int(x.busid), _bus_int(x.target)): x for x in links}
        seen: set[frozenset[int | None]] = set()
        for (a, b), x in pair.items():
            back = pair.get((b, a))
            key = frozenset((a, b))
            if back is None or key in seen or x.count == back.count:
                continue
            seen.add(key)
            yield RULE.finding(
                f"NVLink counts disagree between GPU {x.cuda_dev} ({x.busid}: {x.count} link(s) "
                f"to {x.target}) and GPU {back.cuda_dev} ({back.busid}: {back.count} link(s) "
                f"back): links are down on one side.",
                [x, back],
            )
        switch = [x for x in links if x.tclass == "0x068000" or x.target.startswith("fffffff")]
        by_sm: dict[int | None, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        recs: dict[str, TopoXmlNvlink] = {}
        for x in switch:
            by_sm[x.sm][x.busid or ""] += x.count or 0
            recs.setdefault(x.busid or "", x)
        for totals in by_sm.values():
            most = max(totals.values(), default=0)
            low = sorted(b for b, n in totals.items() if n < most)
            if low and len(totals) > 1:
                yield RULE.finding(
                    f"{len(low)} GPU(s) have fewer NVSwitch links than their peers' {most}: "
                    + ", ".join(f"{b} ({totals[b]})" for b in low)
                    + ".",
                    [recs[b] for b in low],
                )


RULE = Rule(
    id="TOPO101",
    name="nvlink-count-asymmetric",
    category=Category.TOPOLOGY_MISDETECTED,
    severity=Severity.WARNING,
    reads=(TopoXmlNvlink,),
    check=_check_nvlink_asymmetry,
    settings=("NCCL_TOPO_DUMP_FILE",),
    incident="https://github.com/Timez-zx/nccl-tests (nccl_topo_dump.xml, simulated NVLink fault)",
)
