"""Text from outside Stiva made safe to show in a terminal.

    printable(text) -> str      # escape sequences, control and invisible characters removed (\\n, \\t kept)
    PrintableStream()           # the same for a text that comes in pieces: feed(piece), flush()
    scrub(value)                # the same for every string inside an event, a trace, a list...
    UNSAFE                      # one character that a terminal could act on, or that shows nothing

A model's answer, a provider's error body, a model id a local server lists, a question sent to
`stiva serve`: none of it may retitle the terminal (OSC 2), fill the clipboard (OSC 52), clear or
move the screen (CSI), or reorder what the user reads (bidi overrides). `stiva ask` prints through
`printable`; the app scrubs what it is given and, whatever a screen forgets, drops every such
character from each line it draws (tui/text.py).

Invisible characters go too (zero-width ones, the soft hyphen, the word joiner, variation
selectors, tag characters): woven between a key's characters they hide it from the key mask, and
nothing on screen shows them. So a provider's text is made printable *before* its keys are masked
(keys.AnswerMask, keys.mask), on every path it takes: the app, `stiva ask`, the history and
`stiva serve`'s replies hold the cleaned text. The cost: an emoji joined by U+200D (a family)
shows as its parts, and a variation selector's choice of emoji or text style is lost.
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
# And the characters that take no cell and show nothing: the soft hyphen, the combining grapheme
# joiner, the Arabic letter mark, Hangul fillers, Khmer's inherent vowels, Mongolian selectors,
# zero-width space, non-joiner and joiner, the LRM/RLM marks, the word joiner and invisible
# operators, the deprecated format characters, variation selectors, the BOM (zero-width no-break
# space), interlinear annotation, musical format characters, and the tag characters.
INVISIBLE = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2060-\u2064\u206a-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb\U0001d173-\U0001d17a\U000e0000-\U000e007f"
    "\U000e0100-\U000e01ef"
)
UNSAFE = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f\\u202a-\\u202e\\u2066-\\u2069{INVISIBLE}]")
# ... and the same with newline and tab, for a line already laid out (nothing there may hold them).
UNSAFE_IN_LINE = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f\\u202a-\\u202e\\u2066-\\u2069{INVISIBLE}]")

_MAX_DEPTH = 16


def printable(text: str) -> str:
    """`text` safe to write to a terminal: escape sequences, control characters and characters
    that show nothing removed (newlines and tabs kept). A provider's text gets it before its keys
    are masked (keys.mask_known), so what is stored and sent holds it too."""
    if not UNSAFE.search(text):
        return text
    return UNSAFE.sub("", _SEQUENCES.sub("", text))


# What may be an escape sequence that the next piece of a text completes: ESC with intermediates,
# or a CSI with its parameters, running to the end. Looked for only in the last HOLD characters.
_UNFINISHED = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*\Z|\x1b[ -/]*\Z")
_STRING_START_8BIT = re.compile(r"[\x90\x98\x9d\x9e\x9f]")
_STRING_END = re.compile(r"[\x07\x1b\x9c]")


class PrintableStream:
    """`printable` for a text that comes in pieces (a streamed answer): `feed(piece)` returns
    what may be shown now, `flush()` the rest at the end; the pieces joined are what `printable`
    makes of the whole text. Held back: at most the last HOLD characters, where they may begin an
    escape sequence the next piece ends (ESC, ESC [ 3 1). An OSC, DCS, APC or PM string is dropped
    as it comes, up to its end however many pieces later, and never held. Linear in the text."""

    HOLD = 64  # a CSI's parameters longer than this are shown as text (its ESC gone: harmless)

    def __init__(self) -> None:
        self._held = ""
        self._in_string = False  # inside an OSC/DCS/SOS/PM/APC string whose end has not come

    def feed(self, piece: str) -> str:
        text, self._held = self._held + piece, ""
        if self._in_string:
            text = self._after_string(text)
            if self._in_string:
                return ""
        start = max(0, len(text) - self.HOLD)
        unfinished = _UNFINISHED.search(text, start)
        cut = unfinished.start() if unfinished else len(text)
        self._held = text[cut:]
        return self._clean(text[:cut])

    def flush(self) -> str:
        text, self._held = self._held, ""
        if self._in_string:  # the string's end never came: the rest is dropped, as printable does
            text = self._after_string(text)
            self._in_string, self._held = False, ""
        return printable(text)

    def _after_string(self, text: str) -> str:
        """`text` from where the string being dropped ends (all of it dropped if it does not)."""
        end = _STRING_END.search(text)
        if end is None:
            return ""
        at = end.start()
        if text[at] != "\x1b":  # BEL or 8-bit ST
            self._in_string = False
            return text[at + 1 :]
        if at + 1 == len(text):  # ESC: the start of ST (ESC \\), or of a new sequence
            self._held = "\x1b"
            return ""
        self._in_string = False
        return text[at + 2 :] if text[at + 1] == "\\" else text[at:]

    def _clean(self, text: str) -> str:
        if not UNSAFE.search(text):
            return text
        self._in_string = _ends_in_string(text)
        return UNSAFE.sub("", _SEQUENCES.sub("", text))


def _ends_in_string(text: str) -> bool:
    """Whether `text` ends inside an OSC, DCS, SOS, PM or APC string (its end yet to come). Such
    a string's body holds no BEL, ESC or 8-bit ST, so it began at the last of those (an ESC that
    opens one), or at an 8-bit introducer after it. Linear: no pattern runs from every start."""
    last = max(text.rfind("\x07"), text.rfind("\x1b"), text.rfind("\x9c"))
    if last >= 0 and text[last] == "\x1b" and text[last + 1 : last + 2] in ("]", "P", "X", "^", "_"):
        return True
    return _STRING_START_8BIT.search(text, last + 1) is not None


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
