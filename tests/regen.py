"""Regenerate the golden files from the real fixtures, or check them (CI).

    python tests/regen.py            # rewrite tests/golden/
    python tests/regen.py --check    # exit 1 and name the files that drifted

Golden files are generated, never hand-edited: records/<log>.jsonl for every real fixture, and
(once diagnose exists) findings/<log>.json. Review the diff of a regeneration like code.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helpers import FIXTURES, GOLDEN, REAL, real_logs, trace_samples  # noqa: E402


def _name(log: Path) -> str:
    return str(log.relative_to(REAL).with_suffix("")).replace("/", "__")


def records_golden(log: Path) -> str:
    from ncclscope.model.records.serialize import record_to_dict
    from ncclscope.parse.parser import parse_path

    source = str(log.relative_to(ROOT))
    lines = [
        json.dumps(record_to_dict(rec), ensure_ascii=False, sort_keys=False)
        for rec in parse_path(log, source=source)
    ]
    return "\n".join(lines) + "\n"


def traces_golden(sample: Path) -> str:
    """What ncclscope reads from one trace fixture: its kind and version, then every record
    (envelope and fields, as the jsonl contract writes them); a log sample (an INFO log or
    nccl-tests output beside the traces) says so, then its records as the line parser reads them."""
    from ncclscope.model.records.serialize import record_to_dict
    from ncclscope.parse.parser import parse_path
    from ncclscope.traces import read_trace, sniff_path

    source = str(sample.relative_to(ROOT))
    kind = sniff_path(str(sample))
    if kind is None:
        logged = [json.dumps({"artifact": None, "read_as": "log"})]
        logged += [
            json.dumps(record_to_dict(rec), ensure_ascii=False)
            for rec in parse_path(sample, source=source)
        ]
        return "\n".join(logged) + "\n"
    read = read_trace(str(sample), kind, source=source)
    head = {"artifact": kind.value, "version": read.version, "lines": read.lines}
    head["notes"] = read.notes
    lines = [json.dumps(head, ensure_ascii=False)]
    lines += [json.dumps(record_to_dict(r), ensure_ascii=False) for r in read.records]
    return "\n".join(lines) + "\n"


def _trace_name(sample: Path) -> str:
    return str(sample.relative_to(FIXTURES)).replace("/", "__")


GENERATORS: dict[str, tuple[str, Callable[[Path], str]]] = {
    "records": (".jsonl", records_golden),
    "traces": (".jsonl", traces_golden),
}


def register(kind: str, suffix: str, fn: Callable[[Path], str]) -> None:
    GENERATORS[kind] = (suffix, fn)


def _load_extra() -> None:
    # Later layers add their goldens here, so one command regenerates everything.
    try:
        from tests import regen_extra
    except ImportError:
        return
    regen_extra.register_all(register)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail on drift instead of writing")
    args = parser.parse_args()
    _load_extra()
    drifted: list[str] = []
    expected_files: set[Path] = set()
    for kind, (suffix, fn) in GENERATORS.items():
        out_dir = GOLDEN / kind
        out_dir.mkdir(parents=True, exist_ok=True)
        inputs = trace_samples() if kind == "traces" else real_logs()
        namer = _trace_name if kind == "traces" else _name
        for log in inputs:
            target = out_dir / f"{namer(log)}{suffix}"
            expected_files.add(target)
            text = fn(log)
            current = target.read_text(encoding="utf-8") if target.exists() else None
            if current != text:
                drifted.append(str(target.relative_to(ROOT)))
                if not args.check:
                    target.write_text(text, encoding="utf-8")
        for stale in out_dir.glob(f"*{suffix}"):
            if stale not in expected_files:
                drifted.append(f"{stale.relative_to(ROOT)} (no fixture)")
                if not args.check:
                    stale.unlink()
    if drifted:
        verb = "drifted" if args.check else "rewritten"
        print(f"{len(drifted)} golden file(s) {verb}:", *drifted, sep="\n  ")
        return 1 if args.check else 0
    print("golden files up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
