"""nccl-tests ``-J``/``--output_file`` JSON (nccl-tests 2.17.3+, ``version`` 3).

The same facts as the text table, so the same records: a result becomes an ``nccl_tests_row``, a
device an ``nccl_tests_device``, the footer ``nccl_tests_oob`` and ``nccl_tests_avg_busbw``; the
bandwidth rules read either. As ``util.cu`` writes it, ``devices`` sits inside ``config``, ``root``
is a string (``"    -1"``) and ``nwrong`` is null with ``-c 0``; a trace-replay row has
``out_of_place: null``.
"""

from __future__ import annotations

import json
from typing import Any

from ncclscope.model.records.foreign import (
    NcclTestsAvgBusbw,
    NcclTestsDevice,
    NcclTestsOob,
    NcclTestsParams,
    NcclTestsRow,
    NcclTestsVersion,
)
from ncclscope.traces.base import TraceRead, as_object, to_float, to_int
from ncclscope.traces.safe import TraceRefused, check_nesting

KNOWN_VERSIONS = (3,)


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def read_nccl_tests_json(data: bytes, read: TraceRead) -> None:
    """Records of an nccl-tests JSON report into ``read``."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise TraceRefused(f"{read.source}: not a JSON document ({exc})") from None
    check_nesting(doc, read.limits, read.source)
    if not isinstance(doc, dict):
        raise TraceRefused(f"{read.source}: an nccl-tests report is a JSON object")
    version = doc.get("version")
    read.version = str(version) if version is not None else None
    if version not in KNOWN_VERSIONS:
        read.notes.append(f"nccl-tests JSON version {version} not known: read as version 3")
    n = 0

    def env(value: Any) -> dict[str, Any]:
        nonlocal n
        n += 1
        return {"source": read.source, "line": n, "text": _text(value)}

    lib = to_int(doc.get("nccl_version"))
    read.add(
        NcclTestsVersion(
            **env({"version": version, "nccl_version": doc.get("nccl_version")}),
            tests_version=f"json-v{version}",
            nccl_library=lib,
        )
    )
    config = as_object(doc.get("config"))
    if config:
        factor = to_int(config.get("step_factor"))
        shown = {k: v for k, v in config.items() if k != "devices"}
        read.add(
            NcclTestsParams(
                **env(shown),
                nthreads=to_int(config.get("nthreads")) or 0,
                ngpus=to_int(config.get("ngpus")) or 0,
                min_bytes=to_int(config.get("minimum_bytes")) or 0,
                max_bytes=to_int(config.get("maximum_bytes")) or 0,
                step=factor if factor is not None else to_int(config.get("step_bytes")) or 0,
                step_kind="factor" if factor is not None else "bytes",
                warmup_iters=to_int(config.get("warmup_iters")) or 0,
                iters=to_int(config.get("iterations")) or 0,
                agg_iters=to_int(config.get("aggregated_iterations")),
                validation=to_int(config.get("validation")) or 0,
                graph=to_int(config.get("graph")),
            )
        )
    devices = config.get("devices", doc.get("devices"))
    for dev in devices if isinstance(devices, list) else []:
        if not isinstance(dev, dict):
            read.unknown(n + 1, _text(dev), "nccl-tests device that is not an object")
            n += 1
            continue
        read.add(
            NcclTestsDevice(
                **env(dev),
                rank=to_int(dev.get("rank")) or 0,
                group=to_int(dev.get("group")),
                process_id=to_int(dev.get("pid")),
                hostname=dev.get("hostname"),
                device=to_int(dev.get("device")) or 0,
                pci=str(dev.get("device_hex", "")),
                gpu_name=str(dev.get("device_info", "")),
            )
        )
    results = doc.get("results")
    for res in results if isinstance(results, list) else []:
        if not isinstance(res, dict) or to_int(res.get("size")) is None:
            n += 1
            read.unknown(n, _text(res), "nccl-tests result without a size")
            continue
        out: dict[str, Any] = (
            res["out_of_place"] if isinstance(res.get("out_of_place"), dict) else {}
        )
        inp: dict[str, Any] = res["in_place"] if isinstance(res.get("in_place"), dict) else {}
        read.add(
            NcclTestsRow(
                **env(res),
                size=to_int(res.get("size")) or 0,
                count=to_int(res.get("count")) or 0,
                type=str(res.get("type", "")),
                redop=res.get("redop"),
                root=to_int(res.get("root")),
                out_time_us=to_float(out.get("time", out.get("cpu_time"))),
                out_algbw=to_float(out.get("alg_bw")),
                out_busbw=to_float(out.get("bus_bw")),
                out_wrong=to_float(out.get("nwrong")),
                in_time_us=to_float(inp.get("time", inp.get("cpu_time"))),
                in_algbw=to_float(inp.get("alg_bw")),
                in_busbw=to_float(inp.get("bus_bw")),
                in_wrong=to_float(inp.get("nwrong")),
            )
        )
    oob = doc.get("out_of_bounds")
    if isinstance(oob, dict):
        count = to_int(oob.get("count")) or 0
        read.add(NcclTestsOob(**env(oob), out_of_bounds=count, verdict="FAILED" if count else "OK"))
    avg = doc.get("average_bus_bandwidth")
    if isinstance(avg, dict) and to_float(avg.get("bandwidth")) is not None:
        okay = avg.get("okay")
        verdict = None if okay == "unchecked" else ("OK" if okay else "FAILED")
        read.add(
            NcclTestsAvgBusbw(
                **env(avg), busbw=to_float(avg.get("bandwidth")) or 0.0, verdict=verdict
            )
        )
    read.lines = n
