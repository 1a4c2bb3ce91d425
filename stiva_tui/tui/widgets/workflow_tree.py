"""The live workflow tree: question → round → the conductor's plan and one node per step.

    tree.handle(event)                  # every engine event; cheap for StepDelta
    WorkflowTree.from_trace(trace)      # rebuild a stored run (Store.get_trace())

Step deltas only mark a step dirty; a 20 fps timer redraws dirty labels and the spinners, so a
flood of tokens costs one label redraw per step per frame.
"""

from __future__ import annotations

from typing import Any

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from ...engine import events as ev
from .. import format as fmt
from ...engine.run_state import Key, RoundState, RunState, StepState

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
FRAME_S = 1 / 20
REASONING_WIDTH = 72
REASONING_LINES = 24

STATUS_ICON = {"waiting": "○", "finished": "✓", "failed": "✗", "cancelled": "■"}
STATUS_STYLE = {"waiting": "dim", "running": "bold $accent", "finished": "bold $success",
                "failed": "bold $error", "cancelled": "$warning"}


class WorkflowTree(Tree[Key]):
    """A `Tree` showing one run; node data is the RunState key ("plan", r) / ("step", r, i)."""

    BINDINGS = [
        Binding("enter", "select_cursor", "Open step", id="tree.open", tooltip="Show the step's full output"),
    ]

    def __init__(self, *, id: str | None = None, classes: str | None = None, frozen: bool = False):
        super().__init__("No question yet", data=("question",), id=id, classes=classes)
        self.show_root = True
        self.guide_depth = 3
        self.frozen = frozen
        self.state = RunState()
        self._node_map: dict[Key, TreeNode[Key]] = {}
        self._dirty: set[Key] = set()
        self._frame = 0
        self._timer = None

    @classmethod
    def from_trace(cls, trace: dict[str, Any], **kwargs: Any) -> "WorkflowTree":
        """A tree of a stored run, as `Store.get_trace()` returns it."""
        tree = cls(**kwargs)
        tree.load_state(RunState.from_trace(trace))
        return tree

    def on_mount(self) -> None:
        self._timer = self.set_interval(FRAME_S, self._tick, pause=self.state.status != "running")
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.refresh_theme())
        if self.state.rounds or self.state.question:
            self.refresh_theme()  # labels built before mounting had no theme colours

    # --- feeding it ----------------------------------------------------------------------------

    def reset(self, question: str = "") -> None:
        """Clear the tree for a new run."""
        self.load_state(RunState(question=question))

    def load_state(self, state: RunState) -> None:
        """Show `state` (e.g. RunState.from_trace) in full."""
        self.state = state
        self._node_map.clear()
        self._dirty.clear()
        self.clear()
        self.root.set_label(self._question_label())
        self.root.expand()
        for r in state.rounds:
            self._round_node(r.round)
            self._relabel(("plan", r.round))
            for s in r.steps:
                self._relabel(("step", s.round, s.index))
        if self._timer is not None and state.status == "running":
            self._timer.resume()

    def handle(self, event: ev.Event) -> list[Key]:
        """Fold one engine event into the tree; returns the keys that changed."""
        keys = self.state.apply(event)
        if isinstance(event, (ev.StepDelta, ev.ConductorDelta)):
            self._dirty.update(keys)  # drawn on the next frame
            return keys
        if isinstance(event, ev.RunStarted):
            self.root.set_label(self._question_label())
            if self._timer is not None:
                self._timer.resume()
        for key in keys:
            if key[0] in ("plan", "step", "round"):
                self._relabel(key)
        if isinstance(event, ev.TERMINAL_EVENTS):
            self.flush()
            self.root.set_label(self._question_label())
            if self._timer is not None:
                self._timer.pause()
        return keys

    def flush(self) -> None:
        """Redraw every label marked dirty since the last frame."""
        dirty, self._dirty = self._dirty, set()
        for key in dirty:
            self._relabel(key)

    def _tick(self) -> None:
        self._frame += 1
        animate = not self.frozen and self._frame % 2 == 0
        if animate:
            for r in self.state.rounds:
                if r.planning:
                    self._dirty.add(("plan", r.round))
                for s in r.steps:
                    if s.status == "running":
                        self._dirty.add(("step", s.round, s.index))
        self.flush()

    # --- nodes ---------------------------------------------------------------------------------

    def node_for(self, key: Key) -> TreeNode[Key] | None:
        return self._node_map.get(key)

    def _round_node(self, number: int) -> TreeNode[Key]:
        key = ("round", number)
        node = self._node_map.get(key)
        if node is None:
            for missing in range(1, number):
                self._round_node(missing)
            node = self.root.add(f"Round {number}", data=key, expand=True)
            self._node_map[key] = node
        return node

    def _relabel(self, key: Key) -> None:
        kind = key[0]
        if kind == "round":
            self._round_node(key[1])
        elif kind == "plan":
            self._relabel_plan(self.state.round(key[1]))
        elif kind == "step":
            self._relabel_step(self.state.step(key[1], key[2]))

    def _relabel_plan(self, r: RoundState) -> None:
        key = ("plan", r.round)
        node = self._node_map.get(key)
        if node is None:
            round_node = self._round_node(r.round)
            node = round_node.add("Plan", data=key, expand=False)
            self._node_map[key] = node
        node.set_label(self._plan_label(r))
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
        if len(node.children) < len(s.failures):
            for failure in s.failures[len(node.children):]:
                label = Text.assemble(("✗ ", "bold $error"), (f"{failure.model} ", "bold"),
                                      (f"attempt {failure.attempt}: ", "dim"),
                                      fmt.one_line(failure.error, 60))
                if failure.fallback and failure.fallback != failure.model:
                    label.append(f"  → {failure.fallback}", style="$warning")
                elif failure.fallback:
                    label.append("  → retry", style="$warning")
                node.add_leaf(label, data=key)

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

    def refresh_theme(self) -> None:
        """Redraw every label with the current theme's colours."""
        self.load_state(self.state)

    def _spinner(self) -> str:
        return SPINNER[0] if self.frozen else SPINNER[(self._frame // 2) % len(SPINNER)]

    def _question_label(self) -> Text:
        state = self.state
        question = fmt.one_line(state.question, 70) if state.question else "No question yet"
        label = Text(question, style="bold")
        suffix = {"finished": ("  ✓", "$success"), "failed": ("  ✗ failed", "$error"),
                  "cancelled": ("  ■ cancelled", "$warning")}.get(state.status)
        if suffix:
            label.append(*suffix)
        return label

    def _plan_label(self, r: RoundState) -> Text:
        if r.planning:
            chars = len(r.conductor_text)
            return Text.assemble((self._spinner() + " ", "bold $accent"), ("Plan", "bold"),
                                 (f"  planning… {chars} chars" if chars else "  planning…", "dim"))
        steps = len(r.steps)
        what = "keep the previous answer" if r.keep_previous else f"{steps} step{'s' if steps != 1 else ''}"
        label = Text.assemble(("✓ ", "bold $success"), ("Plan", "bold"), (f"  {what}", ""))
        if r.prompt_tokens or r.completion_tokens:
            label.append(f"  {fmt.tokens(r.prompt_tokens)}→{fmt.tokens(r.completion_tokens)} tok", style="dim")
        if r.latency_s is not None and not self.frozen:
            label.append(f"  {fmt.seconds(r.latency_s)}", style="dim")
        return label

    def _step_label(self, s: StepState) -> Text:
        icon = self._spinner() if s.status == "running" else STATUS_ICON.get(s.status, "?")
        label = Text.assemble((icon + " ", STATUS_STYLE.get(s.status, "")), (f"{s.index} ", "bold"),
                              (s.model or "…", "bold $secondary" if s.model else "dim"))
        if s.on_fallback:
            label.append(f" ↻ fallback from {s.first_model}", style="$warning")
        elif s.failures and s.status != "failed":
            label.append(f" ↻ retry {s.attempt}", style="$warning")
        access = fmt.access_text(s.access, s.access_all)
        if access:
            label.append(f"  {access}", style="$accent")
        if s.status == "running":
            label.append(f"  ~{fmt.tokens(s.streamed_chars // 4)} tok", style="dim")
        elif s.status == "finished":
            label.append(f"  {fmt.tokens(s.prompt_tokens)}→{fmt.tokens(s.completion_tokens)} tok", style="")
            label.append(f"  {fmt.money(s.cost_usd)}", style="$success")
            if s.latency_s is not None:
                label.append(f"  {fmt.seconds(s.latency_s)}", style="dim")
        elif s.status == "failed":
            label.append("  failed", style="$error")
        elif s.status == "cancelled":
            label.append("  cancelled", style="$warning")
        label.append(f"  {fmt.one_line(s.subtask, 48)}", style="italic dim")
        return label


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    lines: list[str] = []
    for paragraph in (text or "").strip().splitlines():
        lines.extend(textwrap.wrap(paragraph, width) or [""])
    return lines
