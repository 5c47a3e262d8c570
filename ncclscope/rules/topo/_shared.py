"""Helpers shared by several TOPO rules."""

from __future__ import annotations

from ncclscope.model.records.topology import TopoReadFailed

#: the path NCCL builds from a device's NUMA node when the kernel says -1: the node's cpumap,
#: ``node-1`` as read from sysfs, ``node4294967295`` where 2.30.7 prints it with ``%u``
NODE_MINUS_ONE = "/sys/devices/system/node/node-1/"
_NODE_MINUS_ONE_PATHS = (NODE_MINUS_ONE, "/sys/devices/system/node/node4294967295/")


def numa_minus_one_read(rec: TopoReadFailed) -> bool:
    """A sysfs read that failed because the device's NUMA node is -1 (TOPO002's, not TOPO004's)."""
    return rec.path.startswith(_NODE_MINUS_ONE_PATHS)


def _bus_int(busid: str | None) -> int | None:
    """A bus id as NCCL compares them (``0000:0f:00.0`` and the log's ``f000`` are one GPU)."""
    if not busid:
        return None
    try:
        return int(busid.replace(":", "").replace(".", ""), 16)
    except ValueError:
        return None
