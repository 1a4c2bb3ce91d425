"""Compare mode: one question, answered at once by the conductor and by single pool models.

Each chosen system gets a column (`CompareColumn`) that streams its answer and ends with tokens,
cost and latency. The user marks the better answer (keys 1..N, or the column's button); the
session, its runs and the vote are saved in the store, and a saved session reopens with
`CompareScreen(runtime, session_id=...)`. Esc cancels the running runs (and leaves when none runs).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, SelectionList, Static, TextArea
from textual.widgets.selection_list import Selection
from textual.worker import Worker

from ..widgets.compare_column import CONDUCTOR, CompareColumn

MAX_COLUMNS = 9  # votes are bound to the keys 1..9


class CompareScreen(Screen):
    """Side-by-side answers of the conductor and single models to one question."""

    CSS_PATH = "compare.tcss"

    BINDINGS = [
        Binding("ctrl+j", "send", "Send", id="compare.send",
                tooltip="Send the question to every selected system"),
        Binding("alt+enter", "send", "Send", show=False, id="compare.send_alt",
                tooltip="Send the question to every selected system"),
        Binding("escape", "cancel", "Cancel / back", id="compare.cancel",
                tooltip="Cancel the running answers; leave compare mode when none runs"),
        Binding("ctrl+t", "tree", "Conductor tree", id="compare.tree",
                tooltip="Show the conductor's workflow tree"),
        *[Binding(str(n), f"vote({n})", f"Vote {n}", show=False, id=f"compare.vote_{n}",
                  tooltip=f"Mark answer {n} as the better one") for n in range(1, MAX_COLUMNS + 1)],
    ]

    def __init__(self, runtime: Any, systems: list[str] | None = None, session_id: str | None = None,
                 *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.runtime = runtime
        self.requested_systems = list(systems) if systems else None
        self.session_id = session_id
        self.question = ""
        self.columns: list[CompareColumn] = []
        self._workers: list[Worker] = []

    # --- layout -------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Vertical(id="compare-top"):
            with Horizontal(id="compare-input"):
                yield TextArea(id="compare-question", placeholder="Ask one question to several systems")
                yield SelectionList[str](*self._selections(), id="compare-systems")
            yield Static("ctrl+j send · 1..9 mark the better answer · esc cancel", id="compare-hint")
        yield Horizontal(id="compare-columns")
        yield Footer()

    def _selections(self) -> list[Selection[str]]:
        models = [m.id for m in self.runtime.models]
        wanted = self.requested_systems or [CONDUCTOR, *self._default_models(models)]
        options = [Selection("conductor (orchestrated)", CONDUCTOR, CONDUCTOR in wanted)]
        options += [Selection(m, m, m in wanted) for m in models]
        return options

    def _default_models(self, models: list[str]) -> list[str]:
        """The first two models, skipping the embedded one and the remote conductor's own model."""
        skip = {m.id for m in self.runtime.models if m.kind == "embedded"}
        try:
            cfg = self.runtime.conductor_config()
            if cfg.backend == "remote":
                skip.add(cfg.model)
        except Exception:  # a bad --conductor override: shown when the conductor runs
            pass
        preferred = [m for m in models if m not in skip]
        return (preferred or models)[:2]

    async def on_mount(self) -> None:
        self.sub_title = "compare"
        if self.session_id is not None:
            await self._reopen(self.session_id)
        else:
            self.query_one("#compare-question", TextArea).focus()

    # --- sending ------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return any(w.is_running for w in self._workers)

    def chosen_systems(self) -> list[str]:
        """The selected systems in list order (conductor first)."""
        selected = set(self.query_one("#compare-systems", SelectionList).selected)
        order = [CONDUCTOR, *(m.id for m in self.runtime.models)]
        return [s for s in order if s in selected]

    async def action_send(self) -> None:
        question = self.query_one("#compare-question", TextArea).text.strip()
        systems = self.chosen_systems()
        if self.running:
            self.notify("Answers are still coming: esc cancels them", severity="warning")
            return
        if not question:
            self.notify("Write a question first", severity="warning")
            return
        if not systems:
            self.notify("Pick at least one system to compare", severity="warning")
            return
        if len(systems) > MAX_COLUMNS:
            self.notify(f"At most {MAX_COLUMNS} systems at once", severity="warning")
            return
        await self.start(question, systems)

    async def start(self, question: str, systems: list[str]) -> None:
        """Save a new session, lay out one column per system and run them all concurrently."""
        self.question = question
        run_ids = {system: uuid.uuid4().hex for system in systems}
        self.session_id = self._save_session(question, run_ids)
        await self._lay_out(systems, run_ids)
        self._workers = [
            self.run_worker(self._run_system(column, question), group="compare-runs",
                            name=f"compare:{column.system}", exit_on_error=False)
            for column in self.columns
        ]
        # Off the question box, so that the keys 1..9 vote instead of typing.
        self.columns[0].query_one(".column-body").focus()

    def _save_session(self, question: str, run_ids: dict[str, str]) -> str | None:
        store = self.runtime.store
        if store is None:
            return None
        try:
            session_id = store.create_compare_session(question)
            for system, run_id in run_ids.items():
                store.add_compare_entry(session_id, system, run_id)
        except Exception as exc:  # keep comparing even when the history cannot be written
            self.notify(f"The session is not saved: {exc}", severity="error")
            return None
        return session_id

    async def _lay_out(self, systems: list[str], run_ids: dict[str, str | None]) -> None:
        container = self.query_one("#compare-columns", Horizontal)
        await container.remove_children()
        self.columns = [
            CompareColumn(system, n, run_id=run_ids.get(system), subtitle=self._subtitle(system))
            for n, system in enumerate(systems, start=1)
        ]
        await container.mount_all(self.columns)

    def _subtitle(self, system: str) -> str:
        if system != CONDUCTOR:
            return ""
        conductor = self.runtime.conductor
        if conductor is not None:
            return f"{conductor.backend}: {conductor.model}"
        try:
            cfg = self.runtime.conductor_config()
            return f"{cfg.backend}: {cfg.model}"
        except Exception:
            return ""

    async def _run_system(self, column: CompareColumn, question: str) -> None:
        """Run one system and feed its events to its column (a worker; cancelled by esc)."""
        try:
            if column.system == CONDUCTOR:
                column.set_status("loading the conductor")
                loop = asyncio.get_running_loop()

                def progress(fraction: float | None, message: str) -> None:  # called from a thread
                    loop.call_soon_threadsafe(column.set_status, message)

                await self.runtime.ensure_conductor(progress)
                engine = self.runtime.engine(source="tui")
                events = engine.stream("run", question, options=self.runtime.run_options(),
                                       run_id=column.run_id)
            else:
                engine = self.runtime.engine(source="tui")
                events = engine.stream("run_direct", question, column.system,
                                       options=self.runtime.run_options(), run_id=column.run_id)
            async for event in events:
                await column.handle(event)
        except asyncio.CancelledError:
            column.mark_cancelled()
            raise
        except Exception as exc:  # e.g. the conductor could not be loaded
            await column.show_error(f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc))

    # --- reopening ----------------------------------------------------------------------------

    async def _reopen(self, session_id: str) -> None:
        store = self.runtime.store
        if store is None:
            self.notify("No history store: cannot reopen a compare session", severity="error")
            return
        try:
            session = store.get_compare_session(session_id)
        except Exception as exc:
            self.notify(f"Cannot reopen the compare session: {exc}", severity="error")
            return
        self.question = session["question"]
        self.query_one("#compare-question", TextArea).text = session["question"]
        entries = session["entries"][:MAX_COLUMNS]
        systems = [e["system"] for e in entries]
        selection = self.query_one("#compare-systems", SelectionList)
        selection.deselect_all()
        for system in systems:
            try:
                selection.select(system)
            except Exception:  # a model no longer in the pool
                pass
        await self._lay_out(systems, {e["system"]: e["run_id"] for e in entries})
        for column, entry in zip(self.columns, entries):
            column.mark_winner(entry["system"] == session.get("winner"))
            await column.show_trace(entry["trace"])

    # --- voting, cancelling, the tree ---------------------------------------------------------

    def action_vote(self, number: int) -> None:
        if not 1 <= number <= len(self.columns):
            return
        self.vote(self.columns[number - 1].system)

    @on(CompareColumn.VoteRequested)
    def _on_vote_requested(self, message: CompareColumn.VoteRequested) -> None:
        self.vote(message.system)

    def vote(self, system: str) -> None:
        """Record `system` as the winner of this session and highlight its column."""
        store = self.runtime.store
        if store is None or self.session_id is None:
            self.notify("This session is not saved, so the vote cannot be kept", severity="warning")
            return
        try:
            store.record_vote(self.session_id, system)
        except Exception as exc:
            self.notify(f"The vote is not saved: {exc}", severity="error")
            return
        for column in self.columns:
            column.mark_winner(column.system == system)
        self.notify(f"Marked {system} as the better answer")

    def action_cancel(self) -> None:
        if self.running:
            for worker in self._workers:
                worker.cancel()
            self.notify("Cancelled the running answers")
        elif len(self.app.screen_stack) > 1:
            self.app.pop_screen()

    def action_tree(self) -> None:
        for column in self.columns:
            if column.system == CONDUCTOR:
                self.open_tree(column.run_id)
                return
        self.notify("The conductor is not part of this comparison", severity="warning")

    @on(CompareColumn.TreeRequested)
    def _on_tree_requested(self, message: CompareColumn.TreeRequested) -> None:
        self.open_tree(message.run_id)

    def open_tree(self, run_id: str | None) -> None:
        store = self.runtime.store
        if run_id is None or store is None:
            self.notify("No recorded run to show", severity="warning")
            return
        try:
            trace = store.get_trace(run_id)
        except Exception:
            self.notify("The conductor has not started this run yet", severity="warning")
            return
        self.app.push_screen(RunTreeScreen(trace))


class RunTreeScreen(ModalScreen):
    """The conductor's workflow tree of one run (the chat screen's WorkflowTree, from its trace)."""

    DEFAULT_CSS = """
    RunTreeScreen { align: center middle; }
    RunTreeScreen > #tree-frame {
        width: 90%; height: 85%; border: round $accent; background: $surface; padding: 0 1;
    }
    """
    BINDINGS = [Binding("escape", "dismiss", "Close", id="compare.tree_close", tooltip="Close the tree")]

    def __init__(self, trace: dict) -> None:
        super().__init__()
        self.trace = trace

    def compose(self) -> ComposeResult:
        with Vertical(id="tree-frame"):
            yield self._tree_widget()

    def _tree_widget(self):
        try:
            from ..widgets.workflow_tree import WorkflowTree

            return WorkflowTree.from_trace(self.trace)
        except (ImportError, AttributeError):  # the tree widget is not there: show the trace as text
            return Static(trace_outline(self.trace), markup=False)


def trace_outline(trace: dict) -> str:
    """A plain-text outline of a run trace: rounds, steps, models, subtasks and access."""
    lines = [f"question: {trace.get('question', '')}"]
    for round_ in trace.get("rounds") or []:
        lines.append(f"round {round_['round']}" + (" (kept the previous answer)" if round_.get("keep_previous") else ""))
        for step in round_.get("steps") or []:
            access = step.get("access") or []
            lines.append(f"  step {step['index']} [{step.get('status')}] {step.get('model')}: "
                         f"{step.get('subtask', '')}  reads {access or 'the question'}")
    lines.append(f"status: {trace.get('status')}")
    return "\n".join(lines)
