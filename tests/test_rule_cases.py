"""Per-rule cases (tests/cases/rules/<ID>.yaml): log snippets that must and must not fire.

Case file shape::

    rule: NET001
    cases:
      - name: what the case shows
        source: where the snippet comes from (fixture file and its issue thread), or "near miss"
        fires: true
        log: |
          <log lines, verbatim>
        evidence_lines: [3]        # optional: 1-based lines of `log` the evidence must point at
        severity: warning          # optional: the severity of the finding
        artifacts:                 # optional: trace artifacts beside the log (ncclscope.traces)
          topo.xml: |
            <system version="1"> …
        artifact_files: [fixtures/traces/topo_dump/x.xml]   # optional: fixture artifacts
        log_evidence: true         # optional: whether some evidence is a line of `log` (a
                                   # finding linking a trace to the log, or one that must not)
        message_contains: "…"      # optional: text the finding's message must hold

A case with artifacts is read as ``diagnose DIR`` reads a job directory: the log and the artifacts
as files, each recognised by its content.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ncclscope.engine import Selection, run_rules
from ncclscope.model.job import HIGH_VOLUME_KINDS, Job, build_job
from ncclscope.parse.parser import parse_text
from ncclscope.rules import RULES, get
from ncclscope.rules.base import DOC_HEADINGS
from tests.helpers import CASES, ROOT

RULE_CASE_DIR = CASES / "rules"


def _cases() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(RULE_CASE_DIR.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        for i, case in enumerate(data.get("cases", [])):
            out.append((f"{data['rule']}[{i}]", {**case, "rule": data["rule"]}))
    return out


CASES_ = _cases()


def case_job(case: dict[str, Any], tmp_path: Path) -> tuple[Job, list[str]]:
    """The job a case describes (its log, and its artifacts read as a job directory), and the
    texts its evidence may quote."""
    texts = [str(case.get("log", ""))]
    if case.get("artifacts") or case.get("artifact_files"):
        from ncclscope import api

        paths: list[str] = []
        if case.get("log"):
            (tmp_path / "case.log").write_text(case["log"], encoding="utf-8")
            paths.append(str(tmp_path / "case.log"))
        for name, content in (case.get("artifacts") or {}).items():
            (tmp_path / name).write_text(content, encoding="utf-8")
            paths.append(str(tmp_path / name))
            texts.append(content)
        for rel in case.get("artifact_files") or ():
            paths.append(str(ROOT / rel))
        job, _stats = api.build(paths)
    else:
        job = build_job(parse_text(case["log"], source="case.log"), HIGH_VOLUME_KINDS)
    return job, texts


@pytest.mark.parametrize(("case_id", "case"), CASES_, ids=[c[0] for c in CASES_])
def test_rule_case(case_id: str, case: dict[str, Any], tmp_path: Path) -> None:
    rule = get(case["rule"])
    job, texts = case_job(case, tmp_path)
    findings = run_rules(job, Selection(select=(rule.id,)))
    if not case["fires"]:
        assert not findings, f"{case_id} ({case.get('name')}) must not fire: {findings}"
        return
    assert findings, f"{case_id} ({case.get('name')}) must fire"
    if "evidence_lines" in case:
        lines = {e.line for f in findings for e in f.evidence}
        assert set(case["evidence_lines"]) <= lines, (case_id, sorted(lines))
    if "log_evidence" in case:
        from_log = any(e.source.endswith("case.log") for f in findings for e in f.evidence)
        assert from_log is case["log_evidence"], (case_id, [f.evidence for f in findings])
    if "message_contains" in case:
        assert any(case["message_contains"] in f.message for f in findings), (case_id, findings)
    if "severity" in case:
        assert {f.severity.value for f in findings} == {case["severity"]}, (case_id, findings)
    for f in findings:
        assert f.message and f.remediation
        for ev in f.evidence:
            # an inline artifact read whole (JSON) cites its element as re-written JSON
            shown = (
                any(ev.text in t for t in texts)
                or any(ev.source == str(ROOT / rel) for rel in case.get("artifact_files") or ())
                or any(ev.source == str(tmp_path / name) for name in case.get("artifacts") or {})
            )
            assert shown, (case_id, ev)


#: rules whose near misses cannot type a record of a kind the rule reads: it reports every record
#: of those kinds, so a near miss is a neighbouring line the grammar must not type as one of them
NEAR_MISS_READS_NONE: dict[str, str] = {
    "BOOT001": "every bootstrap root error, truncated message, bad NCCL_COMM_ID or stray "
    "connection is a finding",
    "ERR005": "every duplicate-GPU line is a finding",
    "HINT001": "every NCCL HINT is a finding",
    "IB001": "every completion error NCCL prints has a failing status",
    "NET009": "every plugin timeout line is a finding",
    "P2P001": "every P2P-disabled or not-supported line is a finding",
    "TOPO004": "every topology detection fallback is a finding",
    "VER003": "every version-mismatch line is a finding",
    # a healthy RAS report holds no issue line; the case holds that none is typed from it
    "RAS101[RAS says all 256 ranks RUNNING, OK (while PyTorch timed out, NVIDIA/nccl#1730)]": (
        "a RAS report whose ranks are all RUNNING has no issue to type"
    ),
}


@pytest.mark.parametrize(
    ("case_id", "case"),
    [c for c in CASES_ if not c[1]["fires"]],
    ids=[c[0] for c in CASES_ if not c[1]["fires"]],
)
def test_near_miss_types_what_the_rule_reads(
    case_id: str, case: dict[str, Any], tmp_path: Path
) -> None:
    """A near miss must type a record the rule reads: one that types none (or nothing at all)
    cannot fail, whatever the rule does."""
    rule = get(case["rule"])
    exempt = NEAR_MISS_READS_NONE.get(rule.id) or NEAR_MISS_READS_NONE.get(
        f"{rule.id}[{case.get('name')}]"
    )
    if exempt is not None:
        pytest.skip(exempt)
    job, _texts = case_job(case, tmp_path)
    typed = {kind for kind, n in job.counts.items() if n}
    reads = {cls.KIND for cls in rule.reads}
    assert typed & reads, (
        f"{case_id} ({case.get('name')}) types {sorted(typed) or 'nothing'}, none of what "
        f"{rule.id} reads ({sorted(reads)}): it cannot fail"
    )


def test_every_rule_has_cases_that_fire_and_that_do_not() -> None:
    by_rule: dict[str, set[bool]] = {}
    for _, case in CASES_:
        by_rule.setdefault(case["rule"], set()).add(bool(case["fires"]))
    for rule in RULES:
        assert by_rule.get(rule.id) == {True, False}, (
            f"{rule.id}: tests/cases/rules/{rule.id}.yaml needs cases that fire and near misses"
        )


def test_every_rule_is_documented_with_the_fixed_headings() -> None:
    for rule in RULES:
        for heading in DOC_HEADINGS:
            assert heading in rule.doc, f"{rule.id} docstring lacks '{heading}'"
        assert rule.remediation.strip()
        assert rule.reads, rule.id
        assert rule.name == rule.name.lower() and " " not in rule.name, rule.name


def test_at_least_thirty_rules_cover_every_category() -> None:
    from ncclscope.rules.base import Category

    assert len(RULES) >= 30, len(RULES)
    assert {r.category for r in RULES} == set(Category)


def test_hang006_reads_the_silence_across_files() -> None:
    """Which lines came before a kill printed in another file is their stamps' question, not
    their line numbers'. The kill is the real Slurm line (line 2 of its file); the rank's last
    line is built here, stamped 5 and 20 minutes before the kill and placed below line 2 of its
    own file: the corpus holds no log whose stamps fall between the kill line's own prefix
    stamp and the kill."""
    import dataclasses

    from ncclscope.model.records.version_env import EnvSetting

    kill_file = ROOT / "fixtures/real/220-gb200-nemotronh-exit-hang-slurm-time-limit.log"
    kill = [
        r for r in parse_text(kill_file.read_text(), source="slurm.out") if r.KIND == "job_killed"
    ]
    assert len(kill) == 1 and kill[0].line == 2
    # without the application's own stamp in front of the kill line: only the rank's line says
    # when the job last printed
    kill = [dataclasses.replace(kill[0], prefix=None)]

    def rank_line(stamp: str, line: int) -> EnvSetting:
        return EnvSetting(
            source="rank0.log", line=line, timestamp=stamp, name="NCCL_DEBUG", value="INFO"
        )

    for stamp, silent in (("2025-11-24T22:09:50", False), ("2025-11-24T21:54:50", True)):
        job = build_job([rank_line(stamp, 40), *kill])
        found = [f for f in run_rules(job, Selection(("HANG006",), ())) if f.rule == "HANG006"]
        assert len(found) == 1
        assert ("Nothing was printed for 20 min" in found[0].message) is silent, found[0].message
    # a rank's line stamped after the kill is not what came before it, whatever its line number
    job = build_job(
        [rank_line("2025-11-24T22:20:00", 1), rank_line("2025-11-24T21:54:50", 40), *kill]
    )
    found = [f for f in run_rules(job, Selection(("HANG006",), ())) if f.rule == "HANG006"]
    assert "Nothing was printed for 20 min" in found[0].message


def test_hang006_counts_the_last_collective_as_printed() -> None:
    """A job whose collectives ran until the kill did not hang: the last collective call of
    each process (a summarised kind, not a stored record) is what was printed last. The call is
    a real ``AllReduce: opCount`` line (fixtures/real/long/L02), stamped here 90 s before the
    kill; an init line of the same rank is stamped 24 minutes before it."""
    import dataclasses

    from ncclscope.model.records.version_env import EnvSetting

    kill_file = ROOT / "fixtures/real/220-gb200-nemotronh-exit-hang-slurm-time-limit.log"
    kill = [
        r for r in parse_text(kill_file.read_text(), source="slurm.out") if r.KIND == "job_killed"
    ]
    kill = [dataclasses.replace(kill[0], prefix=None)]
    long_log = ROOT / "fixtures/real/long/L02-a100-pcie-pair-subsys-all-2.27.log"
    line = next(t for t in long_log.read_text().splitlines() if "AllReduce: opCount" in t)
    (call,) = parse_text(line + "\n", source="rank0.log")
    assert call.KIND == "coll_call"
    call = dataclasses.replace(call, line=90, timestamp="2025-11-24T22:13:20")
    init = EnvSetting(
        source="rank0.log",
        line=40,
        timestamp="2025-11-24T21:50:50",
        name="NCCL_DEBUG",
        value="INFO",
    )
    job = build_job([init, call, *kill], summarised=HIGH_VOLUME_KINDS)
    assert job.summary(type(call)).count == 1 and not job.of(type(call))
    found = [f for f in run_rules(job, Selection(("HANG006",), ())) if f.rule == "HANG006"]
    assert len(found) == 1
    assert "Nothing was printed" not in found[0].message, found[0].message
    # without the call, the init line is the last thing printed: 24 minutes of silence
    job = build_job([init, *kill], summarised=HIGH_VOLUME_KINDS)
    found = [f for f in run_rules(job, Selection(("HANG006",), ())) if f.rule == "HANG006"]
    assert "Nothing was printed for 24 min" in found[0].message
