"""System names made short enough for a narrow table, and folded where they still do not fit.

    short = short_names(["direct:openai/gpt-4o", "vote:openai/gpt-4o+anthropic/claude-3-5-haiku", "oracle"])
    # {"direct:openai/gpt-4o": "gpt-4o", "vote:...": "vote:gpt-4o+claude-3-5-haiku", "oracle": "oracle"}
    fold("vote:gpt-4o+claude-3-5-haiku+gemini-1.5-flash", 20)
    # ["vote:gpt-4o+", "claude-3-5-haiku+", "gemini-1.5-flash"]

What is left out is what every row shares or what a reader does not need to tell rows apart: a
model's provider (`openai/`), a pool's namespace (`sim:`, `replay:`), `direct:` before a model
alone, and the folders of a router's or an adapter's path. The kind of a system (`vote:`,
`cascade:`, `chain:`, `self-moa:`...) and its `@LEVEL` stay. Where two names would come out the
same, each keeps more (`direct:`, then the whole name): a short name always names one system.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..sim.labels import REPLAY_PREFIX
from ..sim.profiles import SIM_PREFIX

# Between the models of a system that names several: vote:A+B+C, cascade:A+B>C, chain:A>B.
_SEPARATORS = "+>,"
_PIECES = re.compile(rf"[^{re.escape(_SEPARATORS)}]+[{re.escape(_SEPARATORS)}]?|[{re.escape(_SEPARATORS)}]")
_LEVEL = re.compile(r"@[A-Za-z]+$|@[0-9.]+$")  # a preference level: knn@cheap, router:DIR@0.3


def _without_namespace(ref: str) -> str:
    for namespace in (REPLAY_PREFIX, SIM_PREFIX):
        ref = ref.removeprefix(namespace)
    return ref


def short_model(ref: str) -> str:
    """ "replay:openai/gpt-4o" -> "gpt-4o", "sim:quiz" -> "quiz", "ollama/qwen2.5:7b" ->
    "qwen2.5:7b", "/tmp/run/router/" -> "router": the last part of a path or a provider's id."""
    ref = _without_namespace(ref)
    last = ref.rstrip("/").rsplit("/", 1)[-1]
    return last or ref


def _short(name: str, keep_provider: bool) -> str:
    """`name` without `direct:` before a model alone, without the pools' namespaces, and (unless
    `keep_provider`) without the models' providers and the paths' folders."""
    level = _LEVEL.search(name)
    base, suffix = (name[: level.start()], level.group()) if level else (name, "")
    kind, colon, rest = base.partition(":")
    if not colon or not rest:
        return name
    shorten = _without_namespace if keep_provider else short_model

    def short(ref: str) -> str:  # a vote inside a cascade keeps its kind: cascade:A+B>vote:C+D+E
        inner = "vote:" if ref.startswith("vote:") else ""
        return inner + shorten(ref.removeprefix(inner))

    models = "".join(
        short(piece[:-1]) + piece[-1] if piece[-1] in _SEPARATORS else short(piece) for piece in _PIECES.findall(rest)
    )
    if kind == "direct":
        return models + suffix
    return f"{kind}:{models}{suffix}"


def short_names(names: Iterable[str]) -> dict[str, str]:
    """Each name's short form (see the module's docstring), each one different from every other
    name, short or whole."""
    names = list(dict.fromkeys(names))
    shorts: dict[str, str] = {}
    for level in (0, 1, 2):  # 0: shortest; 1: with the providers; 2: the whole name
        for name in names:
            if name in shorts:
                continue
            shorts[name] = name if level == 2 else _short(name, keep_provider=level == 1)
        seen: dict[str, int] = {}
        for name in names:
            seen[shorts[name]] = seen.get(shorts[name], 0) + 1
        clashes = [n for n in names if seen[shorts[n]] > 1 or (shorts[n] != n and shorts[n] in shorts)]
        if not clashes:
            break
        for name in clashes:
            del shorts[name]
    for name in names:  # still clashing after level 2 cannot be: whole names are different
        shorts.setdefault(name, name)
    return shorts


def fold(name: str, width: int) -> list[str]:
    """`name` in lines of at most `width` characters, broken after a separator (+ > , : /)
    where it can be, inside a model's name after a `-`, else cut at the width: nothing is left out."""
    width = max(1, width)
    pieces: list[str] = []
    for piece in re.findall(r"[^+>,:/]*[+>,:/]|[^+>,:/]+", name):
        if len(piece) <= width:
            pieces.append(piece)
            continue
        for part in re.findall(r"[^-]*-|[^-]+", piece):  # claude-3-5-sonnet-20241022
            pieces += [part[i : i + width] for i in range(0, len(part), width)]
    lines: list[str] = []
    line = ""
    for piece in pieces:
        if line and len(line) + len(piece) > width:
            lines.append(line)
            line = ""
        line += piece
    lines.append(line)
    return lines
