"""Log text made safe to show: a log line must not be able to drive the reader's terminal.

Control characters (ESC sequences, OSC titles, carriage returns, bells) are shown as visible
escapes, and rich markup is escaped so ``[bold red]`` in a hostname prints literally.
"""

from __future__ import annotations

import re

from rich.markup import escape

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def neutralise(text: str) -> str:
    """Replace control characters (all but tab and newline) with a visible ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def safe_text(text: str) -> str:
    """Text fit for a rich renderable: controls neutralised, markup escaped."""
    return escape(neutralise(text))
