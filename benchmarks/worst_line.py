"""The slowest line of issue #18's cases beside a normal log of the same size, in one process.

    python benchmarks/worst_line.py            # every case at 100 KB, the ten slowest, the ratio
    python benchmarks/worst_line.py --json     # the slowest and the normal log, for bench.py

Each case of tests/linear_cases.py (every header form the grammar reads, every character class,
runs before, between and inside headers) is written as one line of ``--kb`` KB and parsed through
``ncclscope.api.parse``, token cap lifted (the grammar's own cost: with the cap, such lines are
given up at once). The normal log is the real fixture logs, concatenated, cut at the same size.
Costs are CPU seconds of this thread, the least of ``--rounds``, garbage collector off.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ncclscope import api  # noqa: E402
from ncclscope.parse.limits import Limits  # noqa: E402
from tests.helpers import real_logs  # noqa: E402
from tests.linear_cases import CLASSES, all_forms, run  # noqa: E402

UNCAPPED = Limits(max_token_chars=1 << 30)


def cost(path: Path, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        # no gc.collect(): a full pass over the grammar's objects costs more than a parse
        gc.disable()
        try:
            start = time.thread_time()
            for _record in api.parse([path], limits=UNCAPPED).records():
                pass
            best = min(best, time.thread_time() - start)
        finally:
            gc.enable()
    return best


def normal_log(size: int, out: Path) -> Path:
    """Whole lines of the real fixtures, ``size`` bytes or just over."""
    data = bytearray()
    for log in real_logs():
        for line in log.read_bytes().splitlines(keepends=True):
            if len(data) >= size:
                out.write_bytes(bytes(data))
                return out
            data += line
    out.write_bytes(bytes(data))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--kb", type=int, default=100, help="line length in KB (default 100)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="one JSON object: slowest and normal")
    args = ap.parse_args(argv)
    size = args.kb * 1000
    with tempfile.TemporaryDirectory(prefix="ncclscope-worst-") as td:
        tmp = Path(td)
        normal_path = normal_log(size, tmp / "normal.log")
        # untimed first: the scanners Lark builds on first use and the fast path's learned
        # shapes serve every later line of a real log alike
        cost(normal_path, 1)
        normal = cost(normal_path, args.rounds)
        costs: list[tuple[float, str, str]] = []
        line_path = tmp / "line.log"
        for form in all_forms():
            for cls in CLASSES:
                line = form.make(run(cls, size))
                line_path.write_text(line + "\n", encoding="utf-8")
                costs.append((cost(line_path, args.rounds), form.name, cls))
    costs.sort(reverse=True)
    worst = costs[0]
    if args.json:
        print(
            json.dumps(
                {
                    "kb": args.kb,
                    "normal_s": normal,
                    "worst_s": worst[0],
                    "form": worst[1],
                    "class": worst[2],
                    "cases": len(costs),
                }
            )
        )
        return 0
    print(f"normal log, {args.kb} KB: {normal * 1e3:.1f} ms")
    for secs, form_name, cls in costs[:10]:
        print(f"{secs * 1e3:8.1f} ms  {secs / normal:5.2f}× normal  {cls:8} {form_name}")
    print(f"{len(costs)} cases; the slowest costs {worst[0] / normal:.2f}× the normal log")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
