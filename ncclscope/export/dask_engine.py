"""``bulk --engine dask``: the jobs run as tasks on a Dask distributed cluster.

Each job is one task running ``bulk.do_job``, the function the local engine runs: the worker
hashes the job's inputs where they are stored, skips the job if they are what the dataset already
holds, else reads, parses, diagnoses and writes the job's Parquet files straight to the dataset.
Only the plan goes out and only ``JobResult`` summaries come back, so the driver never touches a
log byte. The cluster is the one at ``scheduler`` (a ``tcp://host:8786`` address: a Slurm
allocation through dask-jobqueue, a Kubernetes deployment) or a ``LocalCluster`` of ``workers``
processes started for the run.

Workers must share the inputs and the dataset with the driver: a shared file system or object
storage URLs. dask is imported only here, and only when this engine runs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ncclscope.errors import InputError, InstallError, UsageError
from ncclscope.export.bulk import (
    BulkReport,
    Display,
    JobTask,
    do_job,
    is_archive,
    is_process_local,
)
from ncclscope.export.fs import Folder
from ncclscope.export.fs import is_process_local as is_process_local_path
from ncclscope.export.identify import Scan, scan
from ncclscope.export.writer import JobPlan

#: how long to wait for a scheduler to answer before saying it cannot be reached
CONNECT_TIMEOUT = "20s"


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise InstallError(
            "--engine dask needs dask.distributed (pip install 'ncclscope[dask]')"
        ) from None
    return distributed


@dataclass(frozen=True)
class DaskEngine:
    """A Dask cluster: the one at ``scheduler``, else a LocalCluster of ``workers`` processes
    (default: one per core), one thread each since parsing holds the GIL."""

    scheduler: str | None = None
    workers: int | None = None

    @contextmanager
    def client(self) -> Iterator[Any]:
        distributed = _distributed()
        if self.scheduler is not None:
            try:
                client = distributed.Client(self.scheduler, timeout=CONNECT_TIMEOUT)
            except (OSError, TimeoutError) as exc:
                raise InputError(
                    f"cannot reach the Dask scheduler at {self.scheduler} ({exc})"
                ) from None
            with client:
                yield client
            return
        cluster = distributed.LocalCluster(
            n_workers=self.workers or os.cpu_count() or 1,
            threads_per_worker=1,
            processes=True,
            # no web dashboard (it needs bokeh, and nobody looks at it here); the scheduler's
            # own HTTP endpoints take any free port, not 8787 that another cluster may hold
            dashboard_address=None,
            scheduler_kwargs={"dashboard_address": ":0"},
            silence_logs=logging.ERROR,
        )
        with cluster, distributed.Client(cluster) as client:
            yield client

    def scan(self, files: Sequence[str], priors: dict[str, Scan] | None = None) -> list[Scan]:
        """Each input scanned for its identity by a worker, where it is stored: only its hash
        and its few identity lines come back."""
        if any(is_process_local_path(f) for f in files):
            raise UsageError(
                "memory:// inputs live in this process only; Dask workers cannot see them "
                "(use --engine local)"
            )
        if not files:
            return []
        with self.client() as client:
            known = priors or {}
            futures = client.map(
                scan,
                list(files),
                [is_archive(f) for f in files],
                [known.get(f) for f in files],
                pure=False,
            )
            return list(client.gather(futures))

    def run(
        self,
        plans: Sequence[JobPlan],
        out: Folder,
        known: dict[str, frozenset[tuple[str, str]]],
        report: BulkReport,
        display: Display | None,
        hashes: dict[str, str] | None = None,
    ) -> None:
        if is_process_local(plans, out):
            raise UsageError(
                "memory:// inputs or output live in this process only; Dask workers cannot "
                "see them (use --engine local)"
            )
        tasks = [
            JobTask(plan, out, known.get(plan.job_id), _hashes_of(plan, hashes)) for plan in plans
        ]
        if not tasks:
            return
        distributed = _distributed()
        with self.client() as client:
            report.workers = sum(client.nthreads().values()) or 1
            # pure=False: a job is exported again on request (--force) even with the same plan
            futures = client.map(do_job, tasks, pure=False)
            if display is not None:
                display.start(plans)
            try:
                for future in distributed.as_completed(futures):
                    try:
                        result = future.result()
                    except distributed.KilledWorker as exc:
                        # a worker that cannot import ncclscope, or runs out of memory, dies
                        # on every try: say so in one line rather than a remote traceback
                        raise InputError(
                            f"Dask workers died running a job ({exc}); see the workers' logs "
                            "(is the same ncclscope installed on every worker?)"
                        ) from None
                    # drop the result on the cluster as soon as it is here
                    future.release()
                    report.add(result)
                    if display is not None:
                        display.advance(result)
            finally:
                if display is not None:
                    display.stop()


def _hashes_of(plan: JobPlan, hashes: dict[str, str] | None) -> dict[str, str] | None:
    """The inputs' hashes a scan computed, when it has them all; None: the worker hashes."""
    if hashes is None or not all(i.path in hashes for i in plan.inputs):
        return None
    return {i.path: hashes[i.path] for i in plan.inputs}
