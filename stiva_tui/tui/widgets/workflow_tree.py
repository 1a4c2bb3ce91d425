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

A step is one line where it fits the tree's width, else two or three: its model and figures on
the first (a model id too long for it is cut, never the figures), its subtask folded under it.
Once the plan is priced (PlanEstimated), each step shows its expected cost ("est $0.0012"), and
keeps it beside the final cost when it ends; while it streams, its tokens are marked "~".
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
SUBTASK_LINES = 2  # a folded subtask's lines under its step (one where the tree is narrow)
MIN_SUBTASK = 12  # the fewest cells worth giving a subtask beside the figures that moved
MODEL_AT_LEAST = 10  # a model id is cut to no fewer cells than this to keep a step's figures in sight

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

    def action_cursor_down(self) -> None:
        """Down goes to the next step, not onto the lines folded under this one (they are its own)."""
        key = self._key_at(self.cursor_line)
        while True:
            before = self.cursor_line
            super().action_cursor_down()
            if self.cursor_line == before or key is None or self._key_at(self.cursor_line) != key:
                return

    def action_cursor_up(self) -> None:
        """Up goes to the step above, on its first line, not onto the last line folded under it."""
        super().action_cursor_up()
        key = self._key_at(self.cursor_line)
        while key is not None and self.cursor_line > 0 and self._key_at(self.cursor_line - 1) == key:
            super().action_cursor_up()

    def _key_at(self, line: int) -> Key | None:
        node = self.get_node_at_line(line) if line >= 0 else None
        return node.data if node is not None else None

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
        self._folds: dict[Key, list[TreeNode[Key]]] = {}  # each step's folded subtask lines
        self._failures_shown: dict[Key, int] = {}  # each step's failure lines drawn
        self._width = 0  # the width the steps were last laid out for

    def on_resize(self) -> None:
        compact = 0 < self.size.width < COMPACT_BELOW
        if compact != self.compact or self.size.width != self._width:
            self.compact = compact
            self._width = self.size.width
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
        self._folds.clear()
        self._failures_shown.clear()
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
        if r.budget_note and ("budget", r.round) not in self._node_map:  # what the budget did to the plan
            room = self._room(2 * self.guide_depth) - len("budget ")
            lines = _fold_lines(r.budget_note, room, 3) if room > 8 else [r.budget_note]
            self._node_map[("budget", r.round)] = self._round_node(r.round).add_leaf(
                styled([("budget", "bold $warning", " "), (lines[0], "$warning")]), data=key
            )
            for more in lines[1:]:
                self._round_node(r.round).add_leaf(Text("       " + more, style="italic"), data=key)
        room = self._room(2 * self.guide_depth) - len("why ")
        why = reason_line(r.reasoning, min(100, room) if room > 20 else 100) if not r.planning else ""
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
            node = self._round_node(s.round).add("", data=key, expand=True, allow_expand=False)
            self._node_map[key] = node
        lead, figures, subtask = self._step_label(s)
        head = [*lead, *(part for part, _ in figures)]
        room = self._room(2 * self.guide_depth)  # under the question and its round
        joined = styled([*head, (one_line(subtask, 48), "italic dim")]) if subtask else styled(head)
        if room <= 0 or joined.cell_len <= room:  # it fits on one line (or no width is known yet)
            node.set_label(joined)
            self._fold(node, key, [])
        else:
            first, moved = self._fit_head(lead, figures, room)
            if self.compact:  # narrow: the tokens make way for the subtask (the step's pane has them)
                moved = [part for part in moved if (part, 1) not in figures]
            node.set_label(first)
            # one line under the step: the figures that moved, then the subtask, cut with "…" (the
            # step pane shows it whole); a second only where the moved figures fill the first
            under = self._room(3 * self.guide_depth)
            packed = _pack(moved, under)
            if subtask:
                left = under - styled(packed[-1]).cell_len - 2 if packed else 0
                flat = " ".join(subtask.split())
                if packed and (len(flat) <= left or (self.compact and left >= MIN_SUBTASK)):
                    packed[-1].append((one_line(subtask, left), "italic dim"))
                else:  # lines of its own: one where narrow (the tree is short there), else two
                    folded = _fold_lines(subtask, under, 1 if self.compact else SUBTASK_LINES)
                    packed += [[(line, "italic")] for line in folded]
            self._fold(node, key, [styled(line) for line in packed])
        for failure in s.failures[self._failures_shown.get(key, 0) :]:
            self._failures_shown[key] = self._failures_shown.get(key, 0) + 1
            if failure.fallback and failure.fallback != failure.model:
                then = (f"→ {failure.fallback}", "$warning")
            else:
                then = ("→ retry", "$warning") if failure.fallback else ("", "")
            lead: list[Part] = [
                ("✗", "bold $error", " "),
                (failure.model, "bold", " "),
                (f"attempt {failure.attempt}:", "dim", " "),
            ]
            under = self._room(3 * self.guide_depth)
            line = styled([*lead, (one_line(failure.error, 60), ""), then])
            if under <= 0 or line.cell_len <= under:
                node.add_leaf(line, data=key)
                continue
            room = under - styled([*lead, ("", ""), then]).cell_len - 2
            if room >= 16:  # the error cut to the line
                node.add_leaf(styled([*lead, (one_line(failure.error, room), ""), then]), data=key)
            else:  # the error on a line of its own
                node.add_leaf(styled([*lead, then]), data=key)
                node.add_leaf(Text("  " + one_line(failure.error, under - 2), style="dim"), data=key)

    def _room(self, indent: int) -> int:
        """The cells a label has on a line indented `indent` cells; 0 before the first layout. A
        scrollbar's cells are kept free when none shows yet: more lines may bring one."""
        width = self.scrollable_content_region.width  # inside the padding and any scrollbar
        if width <= 0:
            return 0
        scrollbar = 0 if self.show_vertical_scrollbar else self.styles.scrollbar_size_vertical
        return width - scrollbar - indent

    def _fit_head(self, lead: list[Part], figures: list[tuple[Part, int]], room: int) -> tuple[Text, list[Part]]:
        """A step's first line within `room`, and the figures that move to the next line: the
        figures of least rank move first (the tokens, then the time), then the model id is cut
        (with "…", to no fewer than MODEL_AT_LEAST cells), then the other figures move."""
        kept = [f for f in figures if f[0][0]]
        moved: list[tuple[Part, int]] = []

        def width() -> int:
            return styled([*lead, *(p for p, _ in kept)]).cell_len

        def move(below: int) -> None:
            while width() > room and (low := [f for f in kept if f[1] < below]):
                least = min(low, key=lambda f: f[1])
                kept.remove(least)
                moved.append(least)

        move(3)
        model_at = next((i for i, p in enumerate(lead) if "$secondary" in p[1]), None)
        if width() > room and model_at is not None:
            model = lead[model_at][0]
            keep = max(MODEL_AT_LEAST, len(model) - (width() - room))
            if keep < len(model):
                cut: Part = (model[: keep - 1] + "…", *lead[model_at][1:])  # type: ignore[assignment]
                lead = [*lead[:model_at], cut, *lead[model_at + 1 :]]
        move(99)
        in_order = [f[0] for f in figures if f in moved]
        return styled([*lead, *(p for p, _ in kept)]), in_order

    def _fold(self, node: TreeNode[Key], key: Key, lines: list[Text]) -> None:
        """Show `lines` (figures that did not fit, the folded subtask) as the first leaves under a
        step, replacing the ones drawn."""
        shown = self._folds.get(key, [])
        if [n.label.plain for n in shown] == [line.plain for line in lines]:
            return
        for leaf in shown:
            leaf.remove()
        self._folds[key] = [node.add_leaf(line, data=key, before=i) for i, line in enumerate(lines)]

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

        def cut(piece: list[Part], line: int) -> list[Part]:
            """A piece wider than a whole line: its label cut with "…"."""
            width = room if line == 0 else room - self.guide_depth
            over = styled(piece).cell_len - width
            if room <= 0 or over <= 0 or len(piece[0][0]) - over < 8:
                return piece
            return [(one_line(piece[0][0], len(piece[0][0]) - over), *piece[0][1:]), *piece[1:]]  # type: ignore[list-item]

        lines: list[list[list[Part]]] = []
        for piece in self._estimate_pieces:
            piece = cut(piece, len(lines))
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
        suffix = RUN_SUFFIX.get(state.status, ("", ""))
        room = self._room(2) - (len(suffix[0]) + 2 if suffix[0] else 0)  # the root's toggle
        question = one_line(state.question, min(70, room) if room > 12 else 70) if state.question else "No question yet"
        return styled([(question, "bold"), suffix])

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
        if r.estimated and tokens:
            tokens = "~" + tokens
        note = [(one_line(r.note, 60), "$warning")] if r.note else []
        prefer = [(f"prefer {r.preference}", "$accent")] if r.preference else []
        expected = [(f"est {fmt.money(r.expected_cost)}", "dim")] if r.expected_cost else []
        figures = [(seconds, "dim"), (tokens, "dim")] if self.compact else [(tokens, "dim"), (seconds, "dim")]
        lead: list[Part] = [("✓", "bold $success", " "), ("Plan", "bold"), (what, "")]
        label = styled([*lead, *prefer, *note, *expected, *figures])
        room = self._room(2 * self.guide_depth + 2)  # under the question and its round, and the toggle
        if room <= 0 or label.cell_len <= room:
            return label
        if note:  # the note gets a line of its own: the figures stay in sight
            self._note_line(r, r.note)
        # then the time, the tokens, the estimate go, in that order (the plan's pane has them all)
        kept = [*expected, *figures]
        for least in [(seconds, "dim"), (tokens, "dim"), *expected]:
            if styled([*lead, *prefer, *kept]).cell_len <= room:
                break
            if least in kept:
                kept.remove(least)
        return styled([*lead, *prefer, *kept])

    def _note_line(self, r: RoundState, note: str) -> None:
        """Stiva's note on the plan, on a line of its own under the round (folded; once)."""
        if ("note", r.round) in self._node_map:
            return
        room = self._room(2 * self.guide_depth) - len("note ")
        lines = _fold_lines(note, room, 2) if room > 8 else [note]
        node = self._round_node(r.round)
        plan = self._node_map.get(("plan", r.round))
        after = plan if plan is not None and plan in node.children else None
        first = styled([("note", "bold $warning", " "), (lines[0], "$warning")])
        leaf = node.add(first, ("plan", r.round), after=after, allow_expand=False)  # right under the plan
        self._node_map[("note", r.round)] = leaf
        for more in reversed(lines[1:]):
            node.add(Text("     " + more, style="$warning"), ("plan", r.round), after=leaf, allow_expand=False)

    def _step_label(self, s: StepState) -> tuple[list[Part], list[tuple[Part, int]], str]:
        """The step's first line: its lead (status, number, model, reads) and its figures, each
        with its rank (the higher, the longer it stays on the first line); and its subtask."""
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
        # the plan's estimate before the call: shown until the step ends, then beside its cost
        expected = (f"est {fmt.money(s.expected_cost)}", "dim") if s.expected_cost else ("", "")
        figures: list[tuple[Part, int]] = []
        if s.status == "running":
            _, out, usd = s.live()
            figures = [((f"~{fmt.tokens(out)} tok", "dim"), 4), ((f"~{fmt.money(usd)}" if usd else "", "dim"), 3)]
            figures.append((expected, 2))
        elif s.status == "finished" and s.note:  # a vote's or a gate's count: no call, no cost
            figures = []
            if s.prompt_tokens or s.completion_tokens:  # ... unless a judge was asked: its call's cost
                figures.append(((fmt.money(s.cost_usd), "$success"), 5))
            figures.append(((one_line(s.note, 48), "bold $accent"), 4))
            return parts, figures, ""
        elif s.status == "skipped":  # a gate or the budget stopped it before it ran: never paid
            figures = [(("skipped · $0", "dim"), 4)]
        elif s.status == "finished":
            mark = "~" if s.estimated else ""
            tokens = ((f"{mark}{fmt.tokens(s.prompt_tokens)}→{fmt.tokens(s.completion_tokens)} tok", ""), 1)
            cost = ((f"{mark}{fmt.money(s.cost_usd)}", "$success"), 4)
            seconds = ((fmt.seconds(s.latency_s) if s.latency_s is not None else "", "dim"), 2)
            ranked = (expected, 3)
            figures = [cost, ranked, seconds, tokens] if self.compact else [tokens, cost, ranked, seconds]
        elif s.status in ("failed", "cancelled", "interrupted"):
            figures = [((s.status, "$error" if s.status == "failed" else "$warning"), 4)]
            if s.estimated and (s.completion_tokens or s.cost_usd):  # what it spent before it stopped
                figures.append(((f"~{fmt.tokens(s.completion_tokens)} tok ~{fmt.money(s.cost_usd)}", "dim"), 3))
        else:  # waiting: what it is expected to cost
            figures = [(expected, 3)]
        return parts, figures, s.subtask


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


def _pack(parts: list[Part], width: int) -> list[list[Part]]:
    """`parts` in as few lines of at most `width` cells as they fit in, in order."""
    lines: list[list[Part]] = []
    for part in parts:
        if lines and styled([*lines[-1], part]).cell_len <= width:
            lines[-1].append(part)
        else:
            lines.append([part])
    return lines


def _fold_lines(text: str, width: int, lines: int = SUBTASK_LINES) -> list[str]:
    """`text` on one line, folded to `width` cells in at most `lines` lines, the last cut with "…"."""
    words = " ".join(text.split())
    if width <= 8:
        return [one_line(words, 40)]
    folded = textwrap.wrap(words, width) or [""]
    if len(folded) > lines:
        rest = " ".join(folded[lines - 1 :])
        folded = [*folded[: lines - 1], rest if len(rest) <= width else rest[: width - 1].rstrip() + "…"]
    return folded


def _wrap(text: str, width: int) -> list[str]:
    lines: list[str] = []
    for paragraph in (text or "").strip().splitlines():
        lines.extend(textwrap.wrap(paragraph, width) or [""])
    return lines
