"""Text from outside Stiva made safe to show in a terminal.

    printable(text) -> str      # escape sequences and control characters removed (\\n, \\t kept)
    scrub(value)                # the same for every string inside an event, a trace, a list...
    UNSAFE                      # one character that a terminal could act on (a quick test)

A model's answer, a provider's error body, a model id a local server lists, a question sent to
`stiva serve`: none of it may retitle the terminal (OSC 2), fill the clipboard (OSC 52), clear or
move the screen (CSI), or reorder what the user reads (bidi overrides). `stiva ask` prints through
`printable`; the app scrubs what it is given and, whatever a screen forgets, drops every such
character from each line it draws (tui/text.py). For human output only: `--json` stays exact.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from typing import Any, TypeVar, cast

_T = TypeVar("_T")

# Whole sequences first, so that their parameters go too (not only the ESC that starts them):
#   CSI, 7- and 8-bit:                     ESC [ params intermediates final  |  0x9b ...
#   OSC, DCS, SOS, PM, APC strings:        ESC ] P X ^ _  |  0x9d 0x90 0x98 0x9e 0x9f, up to BEL or
#                                          ST (ESC \ or 0x9c), or to the end where it is missing
#   any other escape:                      ESC, intermediates, one final byte (ESC ( B, ESC c, ESC 7)
_SEQUENCES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
)
# Then any control character left but newline and tab: C0, DEL, C1, and the bidi embeddings,
# overrides and isolates (U+202A-U+202E, U+2066-U+2069), which can make a line read other than it
# runs. Every one of them takes no cell on screen.
UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# ... and the same with newline and tab, for a line already laid out (nothing there may hold them).
UNSAFE_IN_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

_MAX_DEPTH = 16


def printable(text: str) -> str:
    """`text` safe to write to a terminal: escape sequences and control characters removed
    (newlines and tabs kept). For human output only; `--json` stays exact."""
    if not UNSAFE.search(text):
        return text
    return UNSAFE.sub("", _SEQUENCES.sub("", text))


def scrub(value: _T, _depth: int = 0) -> _T:
    """`value` with every string in it `printable`: a str, or a list, tuple, dict, dataclass or
    pydantic model holding strings (an event, a trace, a report). What needs no change is given
    back as it is (the same object); what does is a shallow copy with the cleaned parts in it,
    so the caller's object is never changed."""
    return cast(_T, _scrubbed(value, _depth))


def _scrubbed(value: Any, _depth: int) -> Any:
    if isinstance(value, str):
        return printable(value)
    if _depth >= _MAX_DEPTH or value is None or isinstance(value, (int, float, bytes)):
        return value
    depth = _depth + 1
    if isinstance(value, list):
        items = [_scrubbed(item, depth) for item in value]
        return items if any(a is not b for a, b in zip(items, value)) else value
    if isinstance(value, tuple):
        items = [_scrubbed(item, depth) for item in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        if hasattr(value, "_fields"):  # a named tuple
            return cast(Any, value)._make(items)
        return type(value)(items)
    if isinstance(value, dict):
        pairs = [(_scrubbed(k, depth), _scrubbed(v, depth)) for k, v in value.items()]
        changed = any(k is not k0 or v is not v0 for (k, v), (k0, v0) in zip(pairs, value.items()))
        return dict(pairs) if changed else value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = [f.name for f in dataclasses.fields(value)]
    elif isinstance(getattr(type(value), "model_fields", None), dict):  # a pydantic model
        names = list(type(value).model_fields)
    else:
        return value
    changes: dict[str, Any] = {}
    for name in names:
        old = getattr(value, name, None)
        new = _scrubbed(old, depth)
        if new is not old:
            changes[name] = new
    if not changes:
        return value
    clone = copy.copy(value)  # frozen ones too: no __init__ or validation runs again
    for name, new in changes.items():
        object.__setattr__(clone, name, new)
    return clone
