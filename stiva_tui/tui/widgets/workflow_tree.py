"""The workflow tree: question → round → the conductor's plan and one node per step.

    tree.show(state)          # draw a RunState in full (a new run, or RunState.from_trace)
    tree.redraw(keys)         # redraw what RunState.apply() said changed
    tree.frame = n            # the spinner frame, turned by the tree's owner

The tree only draws: its owner (the chat screen's `LiveRun`, or a screen showing a stored run)
folds the events into the `RunState` and drives the one frame timer, so a flood of tokens costs
one label redraw per step per frame, and a stored run is drawn by the same code.

Narrower than `COMPACT_BELOW` cells (the chat's half of an 80-column terminal), the labels are
compact: a step's cost and time come right after its model, where they stay in sight, and a
fallback is written short. The "≈ instead" line folds where it would not fit.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from ...core import display as fmt
from ...core.run_state import Key, RoundState, RunState, StepState
from ...engine.estimate import counterfactuals, reason_line
from ..text import one_line

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
REASONING_WIDTH = 72
REASONING_LINES = 24
COMPACT_BELOW = 56  # the chat tree is 40 wide at 80 columns, 59 on the run screen at 120

STATUS_ICON = {"waiting": "○", "finished": "✓", "failed": "✗", "cancelled": "■", "interrupted": "■", "skipped": "–"}
STATUS_STYLE = {
    "waiting": "dim",
    "running": "bold $accent",
    "finished": "bold $success",
    "failed": "bold $error",
    "cancelled": "$warning",
    "interrupted": "$warning",
    "skipped": "dim",
}
RUN_SUFFIX = {
    "finished": ("✓", "$success"),
    "failed": ("✗ failed", "$error"),
    "cancelled": ("■ cancelled", "$warning"),
    "interrupted": ("■ interrupted", "$warning"),
}

Part = tuple[str, str] | tuple[str, str, str]  # (text, style[, the gap after it])


class WorkflowTree(Tree[Key]):
    """A `Tree` drawing one `RunState`; node data is its key: ("plan", r) or ("step", r, i)."""

    BINDINGS = [
        Binding("enter", "select_cursor", "Open step", id="tree.open", tooltip="Show the step's full output"),
        Binding(
            "r",
            "fork_step",
            "Fork step",
            id="tree.fork",
            tooltip="Run the selected step again on another model, with every step that reads it, and "
            "compare the two branches",
        ),
    ]

    @dataclass
    class ForkRequested(Message):
        """The user asked to fork step `index` (0-based) of round `round` of the run shown."""

        tree: "WorkflowTree"
        run_id: str
        round: int
        index: int

    # Whether r forks a step here: only where a screen runs the fork (the chat's tree).
    forkable = False

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "fork_step" and not self.forkable:
            return False  # neither shown nor run where no screen forks (a stored run's own screen)
        return True

    def action_fork_step(self) -> None:
        """Ask the screen to fork the step under the cursor (the screen checks it can run)."""
        node = self.cursor_node
        key = node.data if node is not None else None
        if not key or key[0] != "step":
            self.notify("Select a step of the tree first: r runs it again on another model.", severity="warning")
            return
        if not self.state.run_id:
            self.notify("No run to fork yet.", severity="warning")
            return
        self.post_message(self.ForkRequested(self, self.state.run_id, key[1], key[2]))

    def __init__(
        self, state: RunState | None = None, *, id: str | None = None, classes: str | None = None, frozen: bool = False
    ):
        super().__init__("No question yet", data=("question",), id=id, classes=classes)
        self.show_root = True
        self.guide_depth = 3
        self.frozen = frozen  # no clocks, spinners stand still (snapshots)
        self.state = state or RunState()
        self.frame = 0
        self._node_map: dict[Key, TreeNode[Key]] = {}
        # The pool's prices and MoA's make-up, for the "what else would it have cost" line (none: no line).
        self.models: Sequence[Any] = ()
        self.moa: tuple[Sequence[str], str, int] | None = None
        self.compact = False  # narrow: cost and time first (see the module's doc)
        self._estimate_pieces: list[list[Part]] = []  # the "≈ instead" line's parts, as they fold
        self._estimate_shown: list[str] = []  # its lines as drawn

    def on_resize(self) -> None:
        compact = 0 < self.size.width < COMPACT_BELOW
        if compact != self.compact:
            self.compact = compact
            self.show(self.state)
        elif ("estimate",) in self._node_map and [t.plain for t in self._estimate_lines()] != self._estimate_shown:
            self._node_map.pop(("estimate",)).remove()
            self._draw_estimate()

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.show(self.state))
        self.show(self.state)  # labels drawn before mounting had no theme colours

    # --- drawing -------------------------------------------------------------------------------

    def show(self, state: RunState) -> None:
        """Draw `state` in full, replacing what was shown."""
        self.state = state
        self._node_map.clear()
        self.clear()
        self.root.set_label(self._question_label())
        self.root.expand()
        for r in state.rounds:
            self._round_node(r.round)
            self._relabel(("plan", r.round))
            for s in r.steps:
                self._relabel(("step", s.round, s.index))
        self._relabel_estimate()

    def redraw(self, keys: Iterable[Key]) -> None:
        """Redraw the nodes of `keys` (as `RunState.apply` returns them), adding new ones."""
        for key in keys:
            self._relabel(key)

    def node_for(self, key: Key) -> TreeNode[Key] | None:
        return self._node_map.get(key)

    # --- nodes ---------------------------------------------------------------------------------

    def _relabel(self, key: Key) -> None:
        kind = key[0]
        if kind == "run":
            self.root.set_label(self._question_label())
            self._relabel_estimate()
        elif kind == "round":
            self._round_node(key[1])
        elif kind == "plan":
            self._relabel_plan(self.state.round(key[1]))
        elif kind == "step":
            self._relabel_step(self.state.step(key[1], key[2]))

    def _round_node(self, number: int) -> TreeNode[Key]:
        key = ("round", number)
        node = self._node_map.get(key)
        if node is None:
            for missing in range(1, number):
                self._round_node(missing)
            node = self.root.add(f"Round {number}", data=key, expand=True)
            self._node_map[key] = node
        return node

    def _relabel_plan(self, r: RoundState) -> None:
        key = ("plan", r.round)
        node = self._node_map.get(key)
        if node is None:
            node = self._round_node(r.round).add("Plan", data=key, expand=False)
            self._node_map[key] = node
        node.set_label(self._plan_label(r))
        why = reason_line(r.reasoning) if not r.planning else ""
        if why and ("why", r.round) not in self._node_map:  # the one-line answer to "why this plan?"
            self._node_map[("why", r.round)] = self._round_node(r.round).add_leaf(
                styled([("why", "bold $accent", " "), (why, "italic")]), data=key
            )
        if not r.planning and not node.children:
            lines = _wrap(r.reasoning, REASONING_WIDTH) or ["(no reasoning written)"]
            if len(lines) > REASONING_LINES:
                lines = lines[:REASONING_LINES] + ["… (select the plan to read it all)"]
            for line in lines:
                node.add_leaf(Text(line, style="italic"), data=key)

    def _relabel_step(self, s: StepState) -> None:
        key = ("step", s.round, s.index)
        node = self._node_map.get(key)
        if node is None:
            if ("plan", s.round) not in self._node_map:
                self._relabel_plan(self.state.round(s.round))
            node = self._round_node(s.round).add("", data=key, expand=True)
            self._node_map[key] = node
        node.set_label(self._step_label(s))
        for failure in s.failures[len(node.children) :]:
            if failure.fallback and failure.fallback != failure.model:
                then = (f"→ {failure.fallback}", "$warning")
            else:
                then = ("→ retry", "$warning") if failure.fallback else ("", "")
            node.add_leaf(
                styled(
                    [
                        ("✗", "bold $error", " "),
                        (failure.model, "bold", " "),
                        (f"attempt {failure.attempt}:", "dim", " "),
                        (one_line(failure.error, 60), ""),
                        then,
                    ]
                ),
                data=key,
            )

    def _relabel_estimate(self) -> None:
        """Under a finished conductor run: what one call to the cheapest model and MoA would have
        cost for this question (from the prices and this run's tokens; an estimate, and said so)."""
        if ("estimate",) in self._node_map or self.state.mode != "conductor":
            return
        estimates = counterfactuals(self.state, self.models, self.moa)
        if not estimates:
            return
        pieces: list[list[Part]] = [
            [
                (estimate.label, "", " "),
                (
                    fmt.money(estimate.cost_usd) if estimate.cost_usd else f"{fmt.tokens(estimate.tokens)} tok",
                    "$success",
                ),
            ]
            for estimate in estimates
        ]
        self._estimate_pieces = [[("≈ instead", "bold $accent")], *pieces, [("estimated", "dim")]]
        self._draw_estimate()

    def _draw_estimate(self) -> None:
        """The "≈ instead" line, folded to the tree's width (it was cut at 80 and 120 columns): as
        many estimates a line as fit, the lines after the first under it."""
        lines = self._estimate_lines()
        self._estimate_shown = [line.plain for line in lines]
        if len(lines) == 1:
            self._node_map[("estimate",)] = self.root.add_leaf(lines[0], data=("question",))
            return
        node = self.root.add(lines[0], data=("question",), expand=True, allow_expand=False)
        for line in lines[1:]:
            node.add_leaf(line, data=("question",))
        self._node_map[("estimate",)] = node

    def _estimate_lines(self) -> list[Text]:
        # one level under the question (the first line), two for the rest; a cell kept for the
        # scrollbar, which more lines may bring; no width known yet (before the first layout): one line
        room = self.size.width - self.gutter.width - self.styles.scrollbar_size_vertical - self.guide_depth

        def fits(pieces: list[list[Part]], line: int) -> bool:
            width = room if line == 0 else room - self.guide_depth
            return room <= 0 or styled([p for piece in pieces for p in piece]).cell_len <= width

        lines: list[list[list[Part]]] = []
        for piece in self._estimate_pieces:
            if lines and fits([*lines[-1], piece], len(lines) - 1):
                lines[-1].append(piece)
            else:
                lines.append([piece])
        # "estimated" alone on the last line reads as a line of its own: the estimate before it joins it
        if len(lines) > 1 and len(lines[-1]) == 1 and len(lines[-2]) > 1 and fits([lines[-2][-1], *lines[-1]], 1):
            lines[-1].insert(0, lines[-2].pop())
        return [styled([p for piece in line for p in piece]) for line in lines]

    # --- labels --------------------------------------------------------------------------------

    def process_label(self, label: Any) -> Text:
        """Labels are built with `$theme-variable` styles; resolve them for the current theme."""
        if isinstance(label, Text) and any("$" in str(span.style) for span in label.spans):
            label = label.copy()
            label.spans = [span._replace(style=self._resolve(str(span.style))) for span in label.spans]
        return super().process_label(label)

    def _resolve(self, style: str) -> Style:
        variables = self.app.theme_variables if self.is_attached else {}
        words = [variables.get(word[1:], "") if word.startswith("$") else word for word in style.split()]
        try:
            return Style.parse(" ".join(w for w in words if w))
        except Exception:  # a colour Rich cannot read (e.g. with alpha): keep the text plain
            return Style()

    def _spinner(self) -> str:
        return SPINNER[0] if self.frozen else SPINNER[self.frame % len(SPINNER)]

    def _question_label(self) -> Text:
        state = self.state
        question = one_line(state.question, 70) if state.question else "No question yet"
        return styled([(question, "bold"), RUN_SUFFIX.get(state.status, ("", ""))])

    def _plan_label(self, r: RoundState) -> Text:
        if r.planning:
            chars = len(r.conductor_text)
            return styled(
                [
                    (self._spinner(), "bold $accent", " "),
                    ("Plan", "bold"),
                    (f"planning… {chars} chars" if chars else "planning…", "dim"),
                ]
            )
        steps = len(r.steps)
        if not steps and not r.keep_previous and self.state.status in ("cancelled", "failed", "interrupted"):
            # stopped before the plan was written: not a finished plan of 0 steps
            status = self.state.status
            return styled(
                [
                    (STATUS_ICON[status], STATUS_STYLE[status], " "),
                    ("Plan", "bold"),
                    (f"{status} before a plan was written", STATUS_STYLE[status]),
                ]
            )
        what = "keep the previous answer" if r.keep_previous else fmt.count(steps, "step")
        tokens = (
            f"{fmt.tokens(r.prompt_tokens)}→{fmt.tokens(r.completion_tokens)} tok"
            if r.prompt_tokens or r.completion_tokens
            else ""
        )
        seconds = fmt.seconds(r.latency_s) if r.latency_s is not None and not self.frozen else ""
        note = [(one_line(r.note, 60), "$warning")] if r.note else []
        prefer = [(f"prefer {r.preference}", "$accent")] if r.preference else []
        figures = [(seconds, "dim"), (tokens, "dim")] if self.compact else [(tokens, "dim"), (seconds, "dim")]
        return styled([("✓", "bold $success", " "), ("Plan", "bold"), (what, ""), *prefer, *note, *figures])

    def _step_label(self, s: StepState) -> Text:
        icon = self._spinner() if s.status == "running" else STATUS_ICON.get(s.status, "?")
        parts: list[Part] = [(icon, STATUS_STYLE.get(s.status, ""), " "), (fmt.step(s.index), "bold", " ")]
        if s.on_fallback:
            fallback = f"↻ {s.first_model}" if self.compact else f"↻ fallback from {s.first_model}"
            parts += [(s.model, "bold $secondary", " "), (fallback, "$warning")]
        elif s.failures and s.status != "failed":
            parts += [(s.model, "bold $secondary", " "), (f"↻ retry {s.attempt}", "$warning")]
        else:
            parts.append((s.model, "bold $secondary") if s.model else ("…", "dim"))
        parts.append((fmt.reads(s.index, s.access, s.access_all), "$accent"))  # short: it stays in sight
        if s.status == "running":
            parts.append((f"~{fmt.tokens(s.streamed_chars // 4)} tok", "dim"))
        elif s.status == "finished" and s.note:  # a vote's or a gate's count: no call, no cost
            if s.prompt_tokens or s.completion_tokens:  # ... unless a judge was asked: its call's cost
                parts.append((fmt.money(s.cost_usd), "$success"))
            parts.append((one_line(s.note, 48), "bold $accent"))
            return styled(parts)
        elif s.status == "skipped":  # an agreement gate ended the round before it: never run, $0
            parts.append(("skipped · $0", "dim"))
        elif s.status == "finished":
            tokens = (f"{fmt.tokens(s.prompt_tokens)}→{fmt.tokens(s.completion_tokens)} tok", "")
            cost = (fmt.money(s.cost_usd), "$success")
            seconds = (fmt.seconds(s.latency_s) if s.latency_s is not None else "", "dim")
            parts += [cost, seconds, tokens] if self.compact else [tokens, cost, seconds]
        elif s.status in ("failed", "cancelled", "interrupted"):
            parts.append((s.status, "$error" if s.status == "failed" else "$warning"))
        parts.append((one_line(s.subtask, 48), "italic dim"))
        return styled(parts)


def styled(parts: Sequence[Part]) -> Text:
    """One label from (text, style[, gap]) parts; empty parts are left out. The gap after a part
    (two spaces unless given) is drawn in that part's style, so no styled run starts with a space:
    SVG viewers strip a run's leading spaces (see tui/screenshot.py)."""
    kept = [p for p in parts if p[0]]
    label = Text()
    for n, part in enumerate(kept):
        gap = (part[2] if len(part) > 2 else "  ") if n < len(kept) - 1 else ""
        label.append(part[0] + gap, style=part[1])
    return label


def _wrap(text: str, width: int) -> list[str]:
    lines: list[str] = []
    for paragraph in (text or "").strip().splitlines():
        lines.extend(textwrap.wrap(paragraph, width) or [""])
    return lines
