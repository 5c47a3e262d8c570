"""Documentation generated from the code: rule pages, the rule index and the CLI reference.

    python -m ncclscope.docs           # rewrite docs/rules/, docs/cli.md and docs/schema.md
    python -m ncclscope.docs --check   # exit 1 when a generated page is stale (CI)

A rule page is the rule's metadata, its docstring (fixed headings) and its examples, taken from
the rule's case file tests/cases/rules/<ID>.yaml, which the test-suite executes — so every
documented example is known to behave as documented.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from ncclscope.rules import RULES
from ncclscope.rules.base import DOC_HEADINGS, Rule

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "cases" / "rules"
DOCS = ROOT / "docs"


def rule_cases(rule: Rule) -> list[dict[str, Any]]:
    """The rule's case file, or [] when running from an install without the tests."""
    path = CASES / f"{rule.id}.yaml"
    if not path.exists():
        return []
    import yaml

    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    cases: list[dict[str, Any]] = data.get("cases", [])
    return cases


def _fence(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def rule_page(rule: Rule) -> str:
    out = [f"# {rule.id} `{rule.name}`", ""]
    out.append(
        f"Category **{rule.category.value}** · default severity **{rule.severity.value}** · "
        f"reads {', '.join(f'`{k.KIND}`' for k in rule.reads)}"
    )
    if rule.settings:
        out += ["", "Settings involved: " + ", ".join(f"`{s}`" for s in rule.settings)]
    if rule.incident:
        out += ["", f"Real incident: <{rule.incident}>"]
    out.append("")
    for line in rule.doc.splitlines():
        stripped = line.strip()
        if stripped in DOC_HEADINGS:
            out += [f"## {stripped}", ""]
        else:
            out.append(line[4:] if line.startswith("    ") else line)
    cases = rule_cases(rule)
    if cases:
        out += [
            "",
            "## Examples",
            "",
            f"From `tests/cases/rules/{rule.id}.yaml`, executed by the tests.",
        ]
        for case in cases:
            verdict = "Fires" if case.get("fires") else "Does not fire"
            out += ["", f"### {verdict}: {case.get('name', '')}", ""]
            if case.get("source"):
                out += [f"Source: {case['source']}", ""]
            log = str(case.get("log", "")).rstrip("\n")
            if log:
                fence = _fence(log)
                out += [f"{fence}text", log, fence]
            for name, content in (case.get("artifacts") or {}).items():
                text = str(content).rstrip("\n")
                fence = _fence(text)
                out += ["", f"Artifact `{name}`:", "", f"{fence}text", text, fence]
            for path in case.get("artifact_files") or ():
                out += ["", f"Artifact file: `{path}`"]
    return "\n".join(out).rstrip() + "\n"


def rules_index() -> str:
    out = [
        "# Rules",
        "",
        "Generated from the rule registry (`python -m ncclscope.docs`); do not edit.",
        "",
        "| id | name | category | severity | what it detects |",
        "|---|---|---|---|---|",
    ]
    for r in RULES:
        # Python 3.11 allows no backslash inside an f-string expression.
        summary = r.summary.replace("|", "\\|")
        out.append(
            f"| [{r.id}]({r.id}.md) | `{r.name}` | {r.category.value} | {r.severity.value} | "
            f"{summary} |"
        )
    return "\n".join(out) + "\n"


def cli_reference() -> str:
    import click

    from ncclscope.cli import main

    out = [
        "# CLI reference",
        "",
        "Generated from the click app (`python -m ncclscope.docs`); do not edit.",
        "",
    ]
    ctx = click.Context(main, info_name="ncclscope")
    out += ["```text", main.get_help(ctx), "```"]
    for name in sorted(main.list_commands(ctx)):
        cmd = main.get_command(ctx, name)
        if cmd is None:
            continue
        sub = click.Context(cmd, info_name=f"ncclscope {name}", parent=ctx)
        out += ["", f"## ncclscope {name}", "", "```text", cmd.get_help(sub), "```"]
    return "\n".join(out) + "\n"


def generated() -> dict[Path, str]:
    pages = {DOCS / "rules" / f"{r.id}.md": rule_page(r) for r in RULES}
    pages[DOCS / "rules" / "index.md"] = rules_index()
    pages[DOCS / "cli.md"] = cli_reference()
    from ncclscope.export.schemas import schema_markdown

    pages[DOCS / "schema.md"] = schema_markdown()
    return pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ncclscope.docs")
    parser.add_argument("--check", action="store_true", help="fail when a page is stale")
    args = parser.parse_args(argv)
    pages = generated()
    stale = [
        p for p, text in pages.items() if not p.exists() or p.read_text(encoding="utf-8") != text
    ]
    known = set(pages)
    orphans = [p for p in (DOCS / "rules").glob("*.md") if p not in known]
    if args.check:
        for p in [*stale, *orphans]:
            print(f"stale: {p.relative_to(ROOT)}", file=sys.stderr)
        if stale or orphans:
            print("run: python -m ncclscope.docs", file=sys.stderr)
            return 1
        return 0
    for p in stale:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(pages[p], encoding="utf-8")
    for p in orphans:
        p.unlink()
    print(f"{len(stale)} page(s) written, {len(orphans)} removed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
