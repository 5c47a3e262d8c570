"""Coverage-guided fuzzing of the whole intake: bytes in, records out, never an exception.

Run (not part of CI): ``pip install atheris`` then
``python tests/fuzz/fuzz_parse.py -max_total_time=600 fixtures/real`` — the real logs are the
seed corpus (``-max_len`` defaults to the largest seed). Any exception, a broken accounting or a
control character in safe output is a crash that atheris saves as ``crash-<hash>``; replay it with
``python tests/fuzz/fuzz_parse.py crash-<hash>``.
"""

from __future__ import annotations

import io
import sys

import atheris

with atheris.instrument_imports():
    from ncclscope.parse.limits import Limits
    from ncclscope.parse.parser import LineParser, SourceStats, parse_lines
    from ncclscope.parse.reader import decompressing, iter_lines
    from ncclscope.report.safe import markdown_code_block, markdown_text, neutralise, safe_text

# Small caps so that the fuzzer reaches the cut and capped paths with small inputs.
_LIMITS = Limits(
    max_line_bytes=512,
    max_parse_chars=256,
    max_decompressed_bytes=1 << 20,
    ratio_grace_bytes=4096,
    sniff_bytes=64,
)
_PARSER = LineParser(limits=_LIMITS)


def test_one_input(data: bytes) -> None:
    st = SourceStats("fuzz")
    stream = decompressing(io.BytesIO(data), "", _LIMITS, st.damaged)
    lines = iter_lines(stream, "fuzz", st.damaged, _LIMITS)
    records = list(parse_lines(lines, "fuzz", st, _PARSER))
    if st.lines != st.typed + st.unrecognized + st.noise:
        raise AssertionError(f"accounting broken: {st}")
    if st.records != len(records):
        raise AssertionError(f"{st.records} records counted, {len(records)} given")
    for rec in records[:20]:
        shown = neutralise(rec.text)
        if any(c in shown for c in "\x1b\r\x07\x9b\u202e"):
            raise AssertionError(f"control character survives neutralise: {shown!r}")
        safe_text(rec.text)
        markdown_text(rec.text)
    text = data.decode("utf-8", errors="replace")
    block = markdown_code_block(text)
    fence = block.split("\n", 1)[0]
    if fence in block[len(fence) : -len(fence) - 1]:
        raise AssertionError("a code block fence occurs inside its block")


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
