"""TOML read with bounds on its shape, checked before the parser sees the text.

    data = loads(text)          # tomllib.loads, once `check_shape(text)` has passed
    check_shape(text)           # a TomlShapeError naming the line, or nothing

`tomllib` spends time and memory that grow with the square of a dotted key's length: one key of
20,000 parts (`a.a.a…`, 40 KB) took 5 s and 1.6 GB, and a config's 4 MiB cap allows tens of GB.
Deep nesting (arrays, inline tables) makes it recurse. No TOML library offers a bound on either,
so one linear pass over the text refuses, at the first line that passes them, a dotted key of more
than MAX_KEY_PARTS parts ("a.b.c" has 3, in a `[table.header]` too) and brackets or braces opened
more than MAX_DEPTH deep. It knows strings and comments: a dot or bracket inside a quoted value
or after a `#` does not count. What it refuses is a `TomlShapeError`, a `tomllib.TOMLDecodeError`,
so every reader's handler for bad TOML already turns it into its one-line error.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

__all__ = ["MAX_DEPTH", "MAX_KEY_PARTS", "TomlShapeError", "check_shape", "loads"]

MAX_KEY_PARTS = 32  # no Stiva file needs a key of more than a few parts
MAX_DEPTH = 32  # nor arrays or inline tables nested deeper than a few levels


class TomlShapeError(tomllib.TOMLDecodeError):
    """A key with too many dotted parts, or nesting too deep: one line, with the line number."""

    def __init__(self, message: str, line: int) -> None:
        ValueError.__init__(self, f"{message} (at line {line})")  # tomllib's own __init__ varies by version
        self.message, self.line = message, line


def loads(text: str) -> dict[str, Any]:
    """`tomllib.loads(text)`, refused first (a TomlShapeError) when its shape passes the bounds."""
    check_shape(text)
    return tomllib.loads(text)


# One token at a time; each alternative is possessive or bounded, so no text makes the scan
# backtrack. The order matters: multi-line strings before one-line ones.
_TOKENS = re.compile(
    r'(?P<string>"""(?:[^"\\]|\\.|"(?!""))*+(?:"""|\Z)'  # multi-line basic string, or its unclosed rest
    r"|'''(?:[^']|'(?!''))*+(?:'''|\Z)"  # multi-line literal string
    r'|"(?:[^"\\\n]|\\[^\n])*+"?'  # basic string (a missing quote ends it at the line's end)
    r"|'[^'\n]*+'?)"  # literal string
    r"|(?P<comment>#[^\n]*+)"
    r"|(?P<key>[A-Za-z0-9_\- \t\r]++)"  # bare-key characters and blanks: they keep a dotted key going
    r"|(?P<dot>\.)"
    r"|(?P<open>[\[{])"
    r"|(?P<close>[\]}])"
    r"|(?P<newline>\n)"
    r"|(?P<other>[^\"'#A-Za-z0-9_\- \t\r.\[\]{}\n]++)",  # "=", ",", digits' signs...: a key ends
    re.DOTALL,
)


def check_shape(text: str) -> None:
    """Raise TomlShapeError at the first line holding a dotted key of more than MAX_KEY_PARTS
    parts or brackets and braces open more than MAX_DEPTH deep (outside strings and comments).
    Linear in the text's length; stops at the first such line."""
    line = 1
    dots = 0  # in the dotted key (or float) going on
    depth = 0
    for match in _TOKENS.finditer(text):
        kind = match.lastgroup
        if kind == "key" or kind == "string":
            if kind == "string":
                line += match.group().count("\n")
            continue  # a quoted part of a dotted key ("a"."b") keeps it going too
        if kind == "dot":
            dots += 1
            if dots >= MAX_KEY_PARTS:
                raise TomlShapeError(f"a dotted key of more than {MAX_KEY_PARTS} parts", line)
            continue
        dots = 0
        if kind == "newline":
            line += 1
        elif kind == "open":
            depth += 1
            if depth > MAX_DEPTH:
                raise TomlShapeError(f"nested too deeply: arrays or tables more than {MAX_DEPTH} levels deep", line)
        elif kind == "close":
            depth = max(0, depth - 1)
