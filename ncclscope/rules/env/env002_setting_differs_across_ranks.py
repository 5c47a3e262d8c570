"""ENV002 ``setting-differs-across-ranks``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_setting_mismatch(job: Job) -> Iterator[Finding]:
    """
    What it detects
        The same NCCL setting reported with different values by different processes of one job.

    Why it matters
        Ranks that disagree on a setting can build incompatible connections (one side expects
        IB, the other sockets; different protocols or buffer sizes) and hang or fail with
        truncated messages; at best the job runs at the speed of the slowest configuration.

    Evidence it needs
        ``… set by environment to …`` lines from at least two processes.

    What to do
        Set NCCL variables once for the whole job (the launcher's environment), not per node or
        per container; check node-local /etc/nccl.conf files.
    """
    values: dict[str, dict[str, list[EnvSetting]]] = defaultdict(lambda: defaultdict(list))
    for (_host, _pid), proc in job.processes.items():
        for name, rec in proc.env.items():
            values[name][rec.value].append(rec)
    for name, by_value in sorted(values.items()):
        if len(by_value) < 2:
            continue
        # Interface names legitimately differ across hosts (ens3 vs ens4): compare those by host
        # count only when every host reports one value.
        summary = ", ".join(
            f"{value!r} on {len({r.host for r in recs})} host(s)"
            for value, recs in sorted(by_value.items())
        )
        evidence = [recs[0] for _, recs in sorted(by_value.items())]
        yield RULE.finding(f"{name} differs across processes: {summary}.", evidence)


RULE = Rule(
    id="ENV002",
    name="setting-differs-across-ranks",
    category=Category.VERSION_MISMATCH,
    severity=Severity.WARNING,
    reads=(EnvSetting,),
    check=_check_setting_mismatch,
)
