"""Caps that keep a hostile or damaged input from taking unbounded memory, time or disk.

Logs come from anyone's job, so every size that an input controls is bounded here: the bytes kept
of one line, the characters of a line given to the grammar, and how far a compressed input (or an
archive member) may expand. Pass a ``Limits`` to the readers (``iter_lines``, ``open_input``,
``iter_members``, ``parse_path``) to change them; the defaults fit real NCCL logs with a wide margin.
"""

from __future__ import annotations

from dataclasses import dataclass

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


@dataclass(frozen=True, slots=True)
class Limits:
    """Every cap in one place; the defaults are generous for real logs and small for attacks."""

    #: Bytes of one physical line that are kept; the rest is read and dropped, and the kept text is
    #: marked. The longest real NCCL lines (ring lists of thousands of ranks) are tens of KiB.
    max_line_bytes: int = 1 * MiB
    #: Characters of a line handed to the grammar: a cut message parses as far as it goes and ends
    #: up ``unrecognized``, which is what it is.
    max_parse_chars: int = 256 * KiB
    #: Characters of one token (a run without blanks) past which a line is not given to the
    #: grammar: it is kept as ``unrecognized`` (reason ``over-budget``) and counted as damage.
    #: The grammar's patterns run in linear time (tests/test_linear_time.py); this is the
    #: defence should one stop doing so, because a regex backtracks within a run of characters
    #: its classes take: with the run bounded, such a pattern costs at most the line's length
    #: times this. Up to 2.28 NCCL cuts a whole line at 1,024 bytes (nccl-log-format.md); the
    #: longest token in the shared corpus and fixtures/ is an environment dump of 505 characters.
    max_token_chars: int = 4 * KiB
    #: Bytes one compressed input (or one archive member) may expand to.
    max_decompressed_bytes: int = 64 * GiB
    #: Expansion ratio (output over compressed input) past which decompression stops: a real log
    #: compresses 10-50 times, a zip bomb a thousand times and more.
    max_ratio: float = 1000.0
    #: The ratio is only judged once this much has been produced, so a tiny, very repetitive
    #: log is never refused.
    ratio_grace_bytes: int = 64 * MiB
    #: Bytes at the start of an input examined to tell a log from a binary file.
    sniff_bytes: int = 8 * KiB
    #: Share of non-text bytes (NUL, other C0 controls, invalid UTF-8) in the sniffed bytes from
    #: which an input is treated as binary: every line is counted as noise, nothing is parsed.
    binary_share: float = 0.10
    #: Members read from one tar or zip archive; the rest are skipped with a note.
    max_members: int = 100_000

    def __post_init__(self) -> None:
        for name in (
            "max_line_bytes",
            "max_parse_chars",
            "max_token_chars",
            "sniff_bytes",
            "max_members",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"Limits.{name} must be at least 1")
        if self.max_decompressed_bytes < 1 or self.max_ratio <= 1:
            raise ValueError("Limits.max_decompressed_bytes must be >= 1 and max_ratio > 1")
        if not 0 < self.binary_share <= 1:
            raise ValueError("Limits.binary_share must be in (0, 1]")


DEFAULT_LIMITS = Limits()
