"""The workflow a conductor writes, and the parser for its text (paper-compatible).

A conductor writes free reasoning (a `<think>...</think>` block is dropped) and then three lists:

    model_id = [2, 0, 1]
    subtasks = ["Outline ...", "Solve ...", "Check ..."]
    access_list = [[], [0], "all"]

`parse_workflow(text, pool_size, max_steps)` returns a validated `Workflow` or raises
`WorkflowParseError`, and nothing else, whatever the text.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

MAX_SUBTASK_CHARS = 20_000  # a sanity bound; the grammar of local backends is much tighter


class WorkflowParseError(ValueError):
    """The conductor's text holds no valid workflow. `reason` says what, `position` where."""

    def __init__(self, reason: str, position: int | None = None, field: str | None = None):
        self.reason = reason
        self.position = position
        self.field = field
        where = []
        if field:
            where.append(field)
        if position is not None:
            where.append(f"at character {position}")
        super().__init__(f"{reason} ({', '.join(where)})" if where else reason)


# The kinds of step. A `call` asks its model. A `vote` and an `agree` gate call no model and cost
# nothing: they read the final answers (core/answers.py) of the steps in their access list.
# - `vote`: the majority final answer (a tie goes to the earliest-listed step); its output is the
#   full answer of the first step that gave it. Where fewer than two answers can be read (an open
#   question), its model judges the answers instead: a call, and the tree says so.
# - `agree`: if every step it reads gives the same final answer, the round ends here with that
#   answer and every later step is skipped, never run or paid (FrugalGPT's agreement cascade);
#   otherwise the later steps run, and the workflow's answer is the last step's as usual. Every
#   step after a gate waits for it.
# In the three lists a control step is written by its subtask: "vote", or "stop if they agree". A
# step so written that reads fewer than two earlier steps (or a gate written last) is a call.
CALL, VOTE, AGREE = "call", "vote", "agree"
VOTE_SUBTASK = "vote"
AGREE_SUBTASK = "stop if they agree"
_VOTE_WORDS = re.compile(r"^\W*(?:majority[ _-]?)?vote\b", re.IGNORECASE)
_AGREE_WORDS = re.compile(
    r"^\W*(?:(?:stop|finish|answer|done)\W+if\W+(?:they|both|all|these|the\W+answers)\W+agree|agree\W*\??\W*$)",
    re.IGNORECASE,
)


def control_kind(subtask: str) -> str:
    """The kind of step a subtask names: `vote`, `agree`, or `call` (any other subtask)."""
    if _VOTE_WORDS.match(subtask):
        return VOTE
    if _AGREE_WORDS.match(subtask):
        return AGREE
    return CALL


@dataclass(frozen=True)
class Step:
    model: int  # index into the pool as numbered in the conductor's prompt
    subtask: str
    access: tuple[int, ...]  # earlier steps this one may read ("all" resolved to every one)
    access_all: bool = False  # written as "all"
    kind: str = CALL  # call | vote | agree (see above)

    @property
    def calls(self) -> bool:
        """Whether the step asks its model (a vote may still call it, as a judge)."""
        return self.kind == CALL

    @property
    def is_vote(self) -> bool:
        return self.kind == VOTE

    @property
    def is_gate(self) -> bool:
        """An agreement gate: the round ends here where the steps it reads agree."""
        return self.kind == AGREE


@dataclass(frozen=True)
class Workflow:
    steps: tuple[Step, ...]

    @property
    def is_empty(self) -> bool:
        """Empty lists in a later round: keep the previous answer."""
        return not self.steps

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def calls(self) -> int:
        """How many steps ask a model (at most; a vote on an open question judges, a gate skips)."""
        return sum(1 for s in self.steps if s.calls)

    def gates_before(self, index: int) -> tuple[int, ...]:
        """The agreement gates that come before step `index`: it runs only where each let it."""
        return tuple(i for i in range(index) if self.steps[i].is_gate)

    def to_lists(self) -> dict[str, list[Any]]:
        return {
            "model_id": [s.model for s in self.steps],
            "subtasks": [s.subtask for s in self.steps],
            "access_list": ["all" if s.access_all else list(s.access) for s in self.steps],
        }

    def to_text(self) -> str:
        """The paper's three-line form, which `parse_workflow` reads back."""
        lists = self.to_lists()
        return "\n".join(f"{key} = {json.dumps(value, ensure_ascii=False)}" for key, value in lists.items())

    def shape(self) -> str:
        """A short name of the topology, for display: single, chain, parallel, fan-in, mixed."""
        n = len(self.steps)
        if n == 0:
            return "keep"
        if n == 1:
            return "single"
        if any(s.kind == AGREE for s in self.steps):
            return "cascade"
        if self.steps[-1].kind == VOTE:
            return "vote"
        if all(s.access == ((i - 1,) if i else ()) for i, s in enumerate(self.steps)):
            return "chain"
        if all(not s.access for s in self.steps):
            return "parallel"
        if all(not s.access for s in self.steps[:-1]) and self.steps[-1].access:
            return "fan-in"
        return "dag"


def parse_workflow(text: str, pool_size: int, max_steps: int = 5, *, allow_empty: bool = False) -> Workflow:
    """Parse and validate a conductor's output.

    `allow_empty` accepts three empty lists (a later round keeping the previous answer).
    Raises `WorkflowParseError` for anything else that is not a valid workflow.
    """
    if not isinstance(text, str):
        raise WorkflowParseError(f"expected text, got {type(text).__name__}")
    body, offset = strip_think(text)
    lists = _find_lists(body, offset)
    return workflow_from_lists(lists, pool_size, max_steps, allow_empty=allow_empty)


# Where a list or a quoted "all" can end: only there can a streamed plan become complete.
_CLOSERS = frozenset("]}\"'")
_NAMES = (re.compile(r"model", re.IGNORECASE), re.compile(r"sub", re.IGNORECASE), re.compile(r"access", re.IGNORECASE))


def plan_end(text: str, pool_size: int, max_steps: int = 5, *, allow_empty: bool = False, since: int = 0) -> int | None:
    """Where a plan that is still streaming is complete: the least `end` past `since` at which
    `text[:end]` parses (`parse_workflow`) as a valid workflow, or None while it does not.

    A caller that reads a plan as it arrives calls this with `since` at the length it had checked
    before, and stops reading at the first end: nothing after the lists changes the plan it gets.
    Only the ends of lists and quoted strings are tried; an open `<think>` block is never complete.
    """
    if len(text) <= since or not all(name.search(text) for name in _NAMES):
        return None
    if "<think>" in text and "</think>" not in text:
        return None
    for end in range(max(since, 0), len(text)):
        if text[end] not in _CLOSERS:
            continue
        try:
            parse_workflow(text[: end + 1], pool_size, max_steps, allow_empty=allow_empty)
        except WorkflowParseError:
            continue
        return end + 1
    return None


def split_reasoning(text: str) -> str:
    """The conductor's reasoning: its text before the lists, with any <think> block removed."""
    try:
        body, _ = strip_think(text)
    except WorkflowParseError:
        return text.replace("<think>", "").strip()
    last = None
    for match in _LABEL.finditer(body):
        if _canonical(match.group("label")) == "model_id" and body[match.end() : match.end() + 1] == "[":
            last = match
    if last is None:
        brace = body.rfind("{")
        return body[:brace].strip() if brace >= 0 and '"model' in body[brace:] else body.strip()
    return body[: last.start()].rstrip(" \t\n`").strip()


def strip_think(text: str) -> tuple[str, int]:
    """Drop a `<think>...</think>` block. Returns the rest and its offset in `text`."""
    close = text.rfind("</think>")
    if close >= 0:
        start = close + len("</think>")
        return text[start:], start
    if re.search(r"<think>", text) and not re.search(r"model[ _-]?ids?\s*[:=]", text.split("<think>")[-1]):
        raise WorkflowParseError("the <think> block is never closed and no workflow follows it")
    return text, 0


def workflow_from_lists(
    lists: dict[str, Any], pool_size: int, max_steps: int, *, allow_empty: bool = False
) -> Workflow:
    """Validate the three decoded lists (also used for the JSON form)."""
    if pool_size < 1:
        raise WorkflowParseError("the pool is empty: there is no model to plan for")
    models = lists.get("model_id")
    subtasks = lists.get("subtasks")
    access = lists.get("access_list")
    for name, value in (("model_id", models), ("subtasks", subtasks), ("access_list", access)):
        if value is None:
            raise WorkflowParseError(f"the list {name} is missing", field=name)
        if not isinstance(value, list):
            raise WorkflowParseError(f"{name} must be a list, got {_kind(value)}", field=name)
    assert isinstance(models, list) and isinstance(subtasks, list) and isinstance(access, list)
    if not (len(models) == len(subtasks) == len(access)):
        raise WorkflowParseError(
            f"the lists differ in length: model_id has {len(models)}, subtasks {len(subtasks)}, "
            f"access_list {len(access)}"
        )
    if not models:
        if allow_empty:
            return Workflow(steps=())
        raise WorkflowParseError("the workflow has no steps (empty lists only keep an earlier answer)")
    if len(models) > 2 * max_steps:  # before reading them: votes and gates are at most as many as calls
        raise WorkflowParseError(f"{len(models)} steps, but at most {max_steps} are allowed")
    steps = []
    for i, (model, subtask, acc) in enumerate(zip(models, subtasks, access)):
        text = _subtask(subtask, i)
        kind = control_kind(text)
        step = Step(
            model=_model_index(model, i, pool_size),
            subtask=text,
            access=_access(acc, i),
            access_all=isinstance(acc, str),
            kind=kind,
        )
        if kind != CALL and (len(step.access) < 2 or (kind == AGREE and i == len(models) - 1)):
            # "vote" over fewer than two steps, or a gate with nothing after it, cannot be a control
            # step: it is a call whose subtask happens to say so (a model asked to vote), so every
            # plan a grammar lets through still parses
            step = replace(step, kind=CALL)
        steps.append(step)
    calls = sum(1 for s in steps if s.kind == CALL)
    if calls > max_steps:
        raise WorkflowParseError(f"{calls} steps, but at most {max_steps} are allowed (votes and gates not counted)")
    return Workflow(steps=tuple(steps))


# --- finding the lists in free text -------------------------------------------------------------

_LABEL = re.compile(
    r"""["'`*]*\b(?P<label>model[ _-]?ids?|models|sub[ _-]?tasks?|access[ _-]?lists?|access)\b["'`*]*\s*(?:=|:)\s*""",
    re.IGNORECASE,
)


def _canonical(label: str) -> str:
    label = label.lower()
    if label.startswith("model"):
        return "model_id"
    if label.startswith("sub"):
        return "subtasks"
    return "access_list"


def _find_lists(body: str, offset: int) -> dict[str, Any]:
    """The last occurrence of each labelled list, decoded; or the JSON object form."""
    found: dict[str, tuple[int, Any]] = {}
    for match in _LABEL.finditer(body):
        start = match.end()
        if start >= len(body) or body[start] not in "[\"'":
            continue
        key = _canonical(match.group("label"))
        literal = _balanced(body, start)
        if literal is None:
            found[key] = (offset + start, _UNCLOSED)
            continue
        found[key] = (offset + start, _decode(literal, offset + start, key))
    if {"model_id", "subtasks", "access_list"} <= found.keys():
        for key, (pos, value) in found.items():
            if value is _UNCLOSED:
                raise WorkflowParseError(f"the list {key} is never closed", pos, key)
        return {k: v for k, (_, v) in found.items()}
    from_json = _json_object(body)
    if from_json is not None:
        return from_json
    missing = [k for k in ("model_id", "subtasks", "access_list") if k not in found]
    if len(missing) == 3:
        raise WorkflowParseError("no workflow found: expected model_id = [...], subtasks = [...], access_list = [...]")
    for key, (pos, value) in found.items():
        if value is _UNCLOSED:
            raise WorkflowParseError(f"the list {key} is never closed", pos, key)
    raise WorkflowParseError(f"the list {missing[0]} is missing", field=missing[0])


_UNCLOSED = object()


def _balanced(text: str, start: int) -> str | None:
    """The bracketed (or quoted) literal starting at `start`, respecting strings; None if unclosed."""
    opener = text[start]
    if opener in "\"'":
        # A bare string such as "all" where a list was expected.
        end = _string_end(text, start)
        return None if end is None else text[start : end + 1]
    depth = 0
    i = start
    n = len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'":
            end = _string_end(text, i)
            if end is None:
                return None
            i = end + 1
            continue
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
        i += 1
    return None


def _string_end(text: str, start: int) -> int | None:
    quote = text[start]
    i = start + 1
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == quote:
            return i
        if ch == "\n" and quote == "'":
            return None
        i += 1
    return None


def _decode(literal: str, position: int, key: str) -> Any:
    try:
        return json.loads(literal)
    except Exception:  # noqa: BLE001 - any decoder failure becomes the typed error below
        pass
    try:
        return ast.literal_eval(literal)
    except Exception as exc:  # noqa: BLE001 - SyntaxError, ValueError, RecursionError, MemoryError...
        detail = getattr(exc, "msg", None) or exc.__class__.__name__
        raise WorkflowParseError(f"the list {key} is not a valid literal: {detail}", position, key) from None


def _json_object(body: str) -> dict[str, Any] | None:
    """The last JSON object in the text whose keys name the three lists."""
    index = len(body)
    tries = 0
    while tries < 50:
        index = body.rfind("{", 0, index)
        if index < 0:
            return None
        tries += 1
        literal = _balanced(body, index)
        if literal is None:
            continue
        try:
            value = json.loads(literal)
        except Exception:  # noqa: BLE001
            continue
        if isinstance(value, dict):
            lists: dict[str, Any] = {}
            for k, v in value.items():
                label = _LABEL.fullmatch(f"{k}:") if isinstance(k, str) else None
                if label:
                    lists[_canonical(label.group("label"))] = v
            if "model_id" in lists:
                return lists
    return None


# --- validating single entries ------------------------------------------------------------------


def _kind(value: Any) -> str:
    return {str: "a string", int: "a number", float: "a number", dict: "an object", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


# A step number written as a string: ASCII digits only, and few of them. str.isdigit() also accepts
# "²" (which int() refuses), int() accepts "١" and "１", and refuses over 4300 digits.
_QUOTED_NUMBER = re.compile(r"[0-9]{1,9}")


def _quoted_number(value: Any) -> Any:
    """`value` as an int where it is a string of a few ASCII digits (spaces around allowed), else
    unchanged (and then refused by the caller as not a number)."""
    if isinstance(value, str) and _QUOTED_NUMBER.fullmatch(value.strip()):
        return int(value.strip())
    return value


def _model_index(value: Any, i: int, pool_size: int) -> int:
    value = _quoted_number(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise WorkflowParseError(f"model_id[{i}] must be a model number, got {_kind(value)}", field=f"model_id[{i}]")
    if not 0 <= value < pool_size:
        raise WorkflowParseError(
            f"model_id[{i}] is {value}, but the pool has models 0..{pool_size - 1}", field=f"model_id[{i}]"
        )
    return value


def _subtask(value: Any, i: int) -> str:
    if not isinstance(value, str):
        raise WorkflowParseError(f"subtasks[{i}] must be a string, got {_kind(value)}", field=f"subtasks[{i}]")
    text = value.strip()
    if not text:
        raise WorkflowParseError(f"subtasks[{i}] is empty", field=f"subtasks[{i}]")
    if len(text) > MAX_SUBTASK_CHARS:
        raise WorkflowParseError(
            f"subtasks[{i}] is {len(text)} characters long (at most {MAX_SUBTASK_CHARS})", field=f"subtasks[{i}]"
        )
    return text


def _access(value: Any, i: int) -> tuple[int, ...]:
    where = f"access_list[{i}]"
    if isinstance(value, str):
        if value.strip().lower() == "all":
            return tuple(range(i))
        raise WorkflowParseError(f'{where} must be a list of earlier steps or "all", got {value[:40]!r}', field=where)
    if isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, list):
        raise WorkflowParseError(f'{where} must be a list of earlier steps or "all", got {_kind(value)}', field=where)
    seen: list[int] = []
    for ref in value:
        ref = _quoted_number(ref)
        if isinstance(ref, bool) or not isinstance(ref, int):
            raise WorkflowParseError(f"{where} holds {_kind(ref)}, expected step numbers", field=where)
        if ref < 0 or ref >= i:
            raise WorkflowParseError(
                f"{where} refers to step {ref}, but step {i} may only read earlier steps"
                + (f" (0..{i - 1})" if i else " (it is the first step: use [])"),
                field=where,
            )
        if ref not in seen:
            seen.append(ref)
    return tuple(sorted(seen))


def steps_visible(workflow: Workflow) -> Iterable[tuple[int, tuple[int, ...]]]:
    """(step index, the steps it reads), in order — a convenience for display."""
    return ((i, s.access) for i, s in enumerate(workflow.steps))
