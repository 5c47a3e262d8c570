"""Helpers shared by rules of several packages."""

from __future__ import annotations

import re

from ncclscope.model.job import Job
from ncclscope.model.records.init import CommInit

#: interfaces a container runtime, a CNI or a VPN creates: never a NIC between nodes
VIRTUAL_NIC = re.compile(
    r"^(?:cali|br-|docker|veth|tunl|flannel|cni|virbr|vxlan|weave|kube-ipvs|cilium|lxc|tap|tun"
    r"|vnet|genev|lo$)"
)


def _log_init(job: Job, comm: str | None, rank: int | None) -> list[CommInit]:
    """The log's Init lines of the communicator a trace names by hash (Inspector ``id``, RAS
    hash, profiler ``CommHash``: the ``commId`` NCCL prints), for this rank when given."""
    if not comm:
        return []
    try:
        wanted = int(comm, 16)
    except ValueError:
        return []
    inits = [c for c in job.of(CommInit) if c.comm_id == wanted]
    mine = [c for c in inits if rank is not None and c.rank == rank]
    return (mine or inits)[:1]
