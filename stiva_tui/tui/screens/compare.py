"""Compare mode: one question, answered at once by the conductor, Mixture-of-Agents and single
pool models.

Each chosen system gets a column (`CompareColumn`) that streams its answer and ends with tokens,
cost and latency. With many systems the columns are narrow: z shows the focused one alone, at
the screen's width, and z again shows them all. The session is recorded through `runtime.sessions.start_compare`, and every
column runs as one `Ask` outside any conversation (`sessions.stream`). The user marks the better
answer (keys 1..N, or the column's button); a saved session reopens with
`CompareScreen(runtime, session_id=...)`. Esc cancels the running runs (and leaves when none runs).

Everything works from the keyboard alone: tab walks the question, the list of systems (up, down,
space ticks) and each column's answer and buttons (enter presses). The question box holds only
what the user typed: a question sent (or reopened) leaves it empty, said in its title, and up
recalls it, so a new question is never spliced into an old one; a question typed in the chat and
not sent yet comes over selected, so typing replaces it. Off the box, a key that compare mode does
not bind (anything but the votes, the zoom and the focused control's own keys) is typed into the
box, not taken by an app-wide binding ("?" is help elsewhere).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import SelectionList, Static
from textual.widgets.selection_list import Selection
from textual.worker import Worker

from ...runtime.modes import BASE_SUFFIX
from ..bindings import keys_for
from ..text import safe_text
from ..widgets.compare_column import CompareColumn
from ..widgets.footer import StivaFooter
from ..widgets.prompt_input import PromptInput
from ..widgets.system_picker import SystemPicker

if TYPE_CHECKING:
    from ...runtime import Runtime

MAX_COLUMNS = 9  # votes are bound to the keys 1..9
ANSWER_ACTIONS = ("vote", "verdict", "zoom")  # the bindings that act on answers shown
CONDUCTOR = "conductor"
MOA = "moa"
# Systems that are not a single pool model, as the selection list names them.
COMPARE_SEND_KEYS = "ctrl+j"
# Offered only when [conductor] adapter is set: the same conductor without it, beside it.
CONDUCTOR_BASE = "conductor" + BASE_SUFFIX
SYSTEM_TITLES = {
    "conductor": "conductor (orchestrated)",
    CONDUCTOR_BASE: "conductor, base (without the adapter)",
    "conductor-mini": "conductor-mini (quick)",
    "moa": "Mixture-of-Agents",
}


def _workflow_title(system: str) -> str:
    """A vote's or a cascade's line in the list: what it does, in words."""
    kind, _, rest = system.partition(":")
    if kind == "vote":
        return f"vote of {', '.join(rest.split('+'))} (majority)"
    if kind == "cascade":
        first, _, last = rest.partition(">")
        return f"{' and '.join(first.split('+'))}, then {last} where they disagree"
    return system


def workflow_systems(models) -> list[str]:
    """The vote and the agreement cascade compare offers on the pool (three or more hosted
    models): a vote of the three dearest (the strongest a price list can tell), and the two
    cheapest first, the dearest only where they disagree."""
    hosted = [m for m in models if m.kind != "embedded"]
    if len(hosted) < 3:
        return []
    by_price = sorted(hosted, key=lambda m: (m.price_in + m.price_out, m.id))
    dearest = [m.id for m in reversed(by_price)][:3]
    cheap = [m.id for m in by_price[:2]]
    return ["vote:" + "+".join(dearest), f"cascade:{cheap[0]}+{cheap[1]}>{dearest[0]}"]


class CompareScreen(Screen):
    """Side-by-side answers of the conductor, Mixture-of-Agents and single models to one question."""

    CSS_PATH = "compare.tcss"

    BINDINGS = [
        Binding(
            COMPARE_SEND_KEYS, "send", "Send", id="compare.send", tooltip="Send the question to every selected system"
        ),
        Binding(
            "alt+enter",
            "send",
            "Send",
            show=False,
            id="compare.send_alt",
            tooltip="Send the question to every selected system",
        ),
        Binding(
            "escape",
            "cancel",
            "Cancel / back",
            id="compare.cancel",
            tooltip="Cancel the running answers; leave compare mode when none runs",
        ),
        Binding("ctrl+t", "tree", "Conductor tree", id="compare.tree", tooltip="Show the conductor's workflow tree"),
        Binding(
            "z",
            "zoom",
            "Zoom",
            id="compare.zoom",
            tooltip="Show the focused answer alone, at the screen's width; again: every answer side by side",
        ),
        Binding(
            "tab",
            "zoom_step(1)",
            "Next answer",
            show=False,
            id="compare.zoom_next",
            tooltip="With one answer zoomed: show the next one (else: the next field, as everywhere)",
        ),
        Binding(
            "shift+tab",
            "zoom_step(-1)",
            "Previous answer",
            show=False,
            id="compare.zoom_previous",
            tooltip="With one answer zoomed: show the one before (else: the field before, as everywhere)",
        ),
        *[
            Binding(
                str(n),
                f"vote({n})",
                f"Vote {n}",
                show=False,
                id=f"compare.vote_{n}",
                tooltip=f"Mark answer {n} as the better one",
            )
            for n in range(1, MAX_COLUMNS + 1)
        ],
        Binding(
            "0",
            "verdict('tie')",
            "Tie",
            show=False,
            id="compare.tie",
            tooltip="Mark every answer as equally good (no pair to learn from)",
        ),
        Binding(
            "x",
            "verdict('all_wrong')",
            "All wrong",
            show=False,
            id="compare.all_wrong",
            tooltip="Mark every answer as wrong (no winner to learn from)",
        ),
    ]

    # Reopened, the focus goes to the first answer rather than the question box (a fork's branches).
    answers_first = False

    def __init__(
        self,
        runtime: "Runtime",
        systems: list[str] | None = None,
        session_id: str | None = None,
        *,
        question: str = "",
        history: list[str] | None = None,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        """`systems`: the ones selected at first (default: the conductor and two pool models);
        `session_id`: a saved session to show again; `question`: typed in the chat and not sent,
        to start from; `history`: the questions asked before, oldest first (up recalls them)."""
        super().__init__(name=name, id=id, classes=classes)
        self.runtime = runtime
        self.initial_question = question
        self.history = [q for q in dict.fromkeys(history or []) if q.strip()]
        self.requested_systems = list(systems) if systems else None
        self.session_id = session_id
        self.verdict: tuple[str, str | None] | None = None  # the session's vote: (kind, winner)
        self.question = ""
        self.columns: list[CompareColumn] = []
        self.zoomed: CompareColumn | None = None  # the one column shown, at full width
        self._workers: list[Worker] = []

    # --- layout -------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        # The chat prompt's widget: enter sends here too when the config's `enter_sends` says so.
        enter_sends = self.runtime.config.enter_sends
        with Vertical(id="compare-top"):
            with Horizontal(id="compare-input"):
                yield PromptInput(id="compare-question", placeholder=self._placeholder(), enter_sends=enter_sends)
                yield SystemPicker(*self._selections(), id="compare-systems")
            yield Static(self._hint(), id="compare-hint", markup=False)
        yield Horizontal(id="compare-columns")
        yield StivaFooter()

    def _placeholder(self) -> str:
        recall = " (↑ recalls the last one)" if self.history else ""
        return f"Ask one question to several systems{recall}"

    def _hint(self) -> str:
        """The keys of compare mode, as the keymap has them now."""
        app = self.app
        if self.runtime.config.enter_sends:
            send = "enter send · alt+enter new line"
        else:
            send = " or ".join(
                (keys_for(app, "compare.send", COMPARE_SEND_KEYS), keys_for(app, "compare.send_alt", "alt+enter"))
            )
            send += " send"
        votes = f"{keys_for(app, 'compare.vote_1', '1')}..{keys_for(app, f'compare.vote_{MAX_COLUMNS}', '9')}"
        zoom = keys_for(app, "compare.zoom", "z")
        if self.zoomed is not None:
            step = keys_for(app, "compare.zoom_next", "tab")
            what = f"answer {self.zoomed.number} of {len(self.columns)} · {step} next · {zoom} every answer"
        else:
            what = f"{zoom} zoom one answer"
        return f"{send} · {votes} better answer · {what} · {keys_for(app, 'compare.cancel', 'escape')} cancel"

    def _systems(self) -> list[str]:
        """Every system offered, in list order: the conductors, MoA, a vote and an agreement
        cascade of the pool's models (where it has three or more hosted ones), then the models."""
        adapter = self.runtime.conductor_config().adapter
        return [
            *(s for s in SYSTEM_TITLES if s != CONDUCTOR_BASE or adapter),
            *workflow_systems(self.runtime.models),
            *(m.id for m in self.runtime.models),
        ]

    def _selections(self) -> list[Selection[str]]:
        # A trained adapter is compared beside its base by default.
        base = [CONDUCTOR_BASE] if self.runtime.conductor_config().adapter else []
        wanted = self.requested_systems or [CONDUCTOR, *base, *self._default_models()]
        return [Selection(safe_text(SYSTEM_TITLES.get(s, _workflow_title(s))), s, s in wanted) for s in self._systems()]

    def _default_models(self) -> list[str]:
        """The first two models, skipping the embedded one and the remote conductor's own model."""
        skip = {m.id for m in self.runtime.models if m.kind == "embedded"}
        cfg = self.runtime.conductor_config()
        if cfg.backend == "remote":
            skip.add(cfg.model)
        models = [m.id for m in self.runtime.models]
        return ([m for m in models if m not in skip] or models)[:2]

    async def on_mount(self) -> None:
        self.sub_title = "compare"
        box = self.query_one("#compare-question", PromptInput)
        box.set_history(self.history)
        if self.session_id is not None:
            await self._reopen(self.session_id)
            if self.answers_first and self.columns:  # a fork's branches, just run: the keys 1..9 vote
                self.columns[0].query_one(".column-body").focus()
        else:
            if self.initial_question:  # typed in the chat: ctrl+j sends it at once, typing replaces it
                box.load_text(self.initial_question)
                box.select_all()
            box.focus()

    # --- sending ------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return any(w.is_running for w in self._workers)

    def chosen_systems(self) -> list[str]:
        """The selected systems in list order (the conductors and MoA first)."""
        selected = set(self.query_one("#compare-systems", SelectionList).selected)
        return [s for s in self._systems() if s in selected]

    @on(PromptInput.Submitted)
    async def _submitted(self, message: PromptInput.Submitted) -> None:
        message.stop()
        await self.action_send()

    async def action_send(self) -> None:
        question = self.query_one("#compare-question", PromptInput).text.strip()
        systems = self.chosen_systems()
        if self.running:
            cancel = keys_for(self.app, "compare.cancel", "escape")
            self.notify(f"Answers are still coming: {cancel} cancels them", severity="warning")
        elif not question:
            self.notify("Write a question first", severity="warning")
        elif not systems:
            self.notify("Pick at least one system to compare", severity="warning")
        elif len(systems) > MAX_COLUMNS:
            self.notify(f"At most {MAX_COLUMNS} systems at once", severity="warning")
        else:
            await self.start(question, systems)

    async def start(self, question: str, systems: list[str]) -> None:
        """Record a new session, lay out one column per system and run them all concurrently."""
        self.question = question
        started = self.runtime.sessions.start_compare(question, systems)
        if started.warning:
            self.notify(started.warning, severity="warning")
        self.session_id = started.session_id
        self.verdict = None  # a new session: no vote yet
        await self._lay_out(systems, started.run_ids)
        self._workers = [
            self.run_worker(
                self._run_system(column, question),
                group="compare-runs",
                name=f"compare:{column.system}",
                exit_on_error=False,
            )
            for column in self.columns
        ]
        self._asked(question)
        # Off the question box, so that the keys 1..9 vote instead of typing.
        self.columns[0].query_one(".column-body").focus()

    def _asked(self, question: str) -> None:
        """`question` is the one compared now: said in the box's title, the box emptied for the
        next one, and up in it recalls this one."""
        self.history = [*(q for q in self.history if q != question), question]
        box = self.query_one("#compare-question", PromptInput)
        box.set_history(self.history)
        box.load_text("")
        box.placeholder = self._placeholder()
        box.border_title = safe_text(f"Compared: {' '.join(question.split())}")

    # --- typing off the question box ------------------------------------------------------------

    def on_key(self, event: events.Key) -> None:
        """A key typed off the question box that nothing here binds goes into the box: after a run
        the focus is on the answers (for the votes), and "?" there opened help mid-question."""
        box = self.query_one("#compare-question", PromptInput)
        if self.focused is box or not event.is_printable or not event.character or event.character.isspace():
            return
        if self._bound_here(event.key):  # a vote, the zoom, the focused control's own key
            return
        event.stop()
        event.prevent_default()
        self.set_focus(box)  # now, not after a refresh: the next keys come straight to the box
        box.post_message(events.Key(event.key, event.character))  # typed there, as if it had the focus

    def _bound_here(self, key: str) -> bool:
        """Whether `key` is bound by this screen or the focused widget (not only app-wide); before
        any answer, the votes and the zoom bind nothing (a question may start with "x" or "2")."""
        return any(
            self.columns or not binding.action.startswith(ANSWER_ACTIONS)
            for namespace, bindings in self._modal_binding_chain
            if namespace is not self.app
            for binding in bindings.key_to_bindings.get(key, ())
        )

    async def _lay_out(
        self, systems: list[str], run_ids: dict[str, str | None], subtitles: dict[str, str] | None = None
    ) -> None:
        """One column per system; `subtitles`: what ran each (a reopened session's own planners)."""
        container = self.query_one("#compare-columns", Horizontal)
        await container.remove_children()
        self.zoomed = None
        self.columns = [
            CompareColumn(
                system,
                n,
                title=system,
                run_id=run_ids.get(system),
                subtitle=subtitles[system] if subtitles is not None and system in subtitles else self._subtitle(system),
                has_tree=system in SYSTEM_TITLES or system.startswith(("vote:", "cascade:", "branch:")),
            )
            for n, system in enumerate(systems, start=1)
        ]
        await container.mount_all(self.columns)
        self._show_hint()

    def _subtitle(self, system: str) -> str:
        """What answers for `system`: the conductor's backend and model; MoA's proposers."""
        if system == MOA:
            return "Mixture-of-Agents"
        if system not in SYSTEM_TITLES:
            return ""
        conductor = self.runtime.conductor
        cfg = self.runtime.conductor_config()
        who = f"{conductor.backend}: {conductor.model}" if conductor is not None else f"{cfg.backend}: {cfg.model}"
        if cfg.adapter:
            who += " · no adapter" if system.endswith(BASE_SUFFIX) else f" · adapter {Path(cfg.adapter).name}"
        return who

    @staticmethod
    def _planned_by(system: str, backend: str | None, model: str | None, adapter: str | None) -> str:
        """A conductor column's subtitle from its run's own planner (the event or the record), not
        the runtime's current one: the pool, and with it the conductor, may have changed since."""
        if system == MOA:
            return "Mixture-of-Agents"
        if system not in SYSTEM_TITLES or not (backend or model):
            return ""
        who = f"{backend}: {model}"
        if adapter:
            who += f" · adapter {Path(adapter).name}"
        elif system.endswith(BASE_SUFFIX):
            who += " · no adapter"
        return who

    async def _run_system(self, column: CompareColumn, question: str) -> None:
        """Run one system and feed its events to its column (a worker; cancelled by esc)."""
        from ...core.events import RunStarted
        from ...runtime import Ask, ConductorMode, SystemNameError, column_system

        try:  # a system name, or a pool model's id (runtime/systems.py)
            system = column_system(column.system, self.runtime.models, self.runtime.config.moa.aggregator)
        except SystemNameError as exc:
            await column.show_error(str(exc))
            return
        mode = system.mode
        loop = asyncio.get_running_loop()

        def progress(fraction: float | None, message: str) -> None:  # called from a loading thread
            loop.call_soon_threadsafe(column.set_status, message)

        if isinstance(mode, ConductorMode) and not self.runtime.conductor_ready:
            column.set_status("loading the conductor")
        ask = Ask(
            question, mode=mode, source="tui", in_conversation=False, run_id=column.run_id, options=dict(system.options)
        )
        try:
            async for event in self.runtime.sessions.stream(ask, progress=progress):
                if isinstance(event, RunStarted) and (
                    planned := self._planned_by(
                        column.system, event.conductor_backend, event.conductor_model, event.conductor_adapter
                    )
                ):
                    column.set_subtitle(planned)  # the planner this run got, chosen when it started
                await column.handle(event)
        except asyncio.CancelledError:
            column.mark_cancelled()
            raise
        except Exception as exc:  # AskError, ConductorError: the run could not start
            await column.show_error(str(exc) or type(exc).__name__)

    # --- reopening ----------------------------------------------------------------------------

    async def _reopen(self, session_id: str) -> None:
        from ...store import StoreError

        store = self.runtime.store
        if store is None:
            self.notify("No history store: cannot reopen a compare session", severity="error")
            return
        try:
            session = store.get_compare_session(session_id)
        except StoreError as exc:
            self.notify(f"Cannot reopen the compare session: {exc}", severity="error")
            return
        self.question = session.question
        self._asked(session.question)
        entries = session.entries[:MAX_COLUMNS]
        selection = self.query_one("#compare-systems", SelectionList)
        selection.deselect_all()
        offered = set(self._systems())
        for entry in entries:
            if entry.system in offered:  # a model no longer in the pool is shown, not offered
                selection.select(entry.system)
        planners = {  # each run's own planner, never the one the runtime has now; a branch: what it forked
            e.system: _branch_subtitle(e.trace)
            if e.trace is not None and e.trace.fork is not None
            else self._planned_by(e.system, c.backend, c.model, c.adapter)
            if e.trace is not None and (c := e.trace.conductor) is not None
            else self._planned_by(e.system, None, None, None)
            for e in entries
        }
        await self._lay_out([e.system for e in entries], {e.system: e.run_id for e in entries}, planners)
        kind = session.vote_kind
        self.verdict = (kind, session.winner) if kind is not None else None
        for column, entry in zip(self.columns, entries):
            column.mark_verdict(
                kind if kind in ("tie", "all_wrong") else ("winner" if entry.system == session.winner else None)
            )
            await column.show_trace(entry.trace)

    # --- voting, cancelling, the tree ---------------------------------------------------------

    def action_vote(self, number: int) -> None:
        if 1 <= number <= len(self.columns):
            self.vote(self.columns[number - 1].system)

    @on(CompareColumn.VoteRequested)
    def _on_vote_requested(self, message: CompareColumn.VoteRequested) -> None:
        self.vote(message.system)

    def vote(self, system: str) -> None:
        """Record `system` as the winner of this session and highlight its column."""
        self._record("winner", system)

    def action_verdict(self, kind: str) -> None:
        """A vote with no winner: "tie" or "all_wrong"."""
        if self.columns:
            self._record(kind, None)

    def _record(self, kind: str, system: str | None) -> None:
        from ...store import StoreError

        store = self.runtime.store
        if store is None or self.session_id is None:
            self.notify("This session is not saved, so the vote cannot be kept", severity="warning")
            return
        try:
            store.record_vote(self.session_id, system, kind=kind)  # type: ignore[arg-type]
        except StoreError as exc:
            self.notify(f"The vote is not saved: {exc}", severity="error")
            return
        for column in self.columns:
            column.mark_verdict(kind if kind != "winner" else ("winner" if column.system == system else None))
        said = {
            "winner": f"{system} as the better answer",
            "tie": "a tie: every answer as good",
            "all_wrong": "every answer as wrong",
        }[kind]
        before = self.verdict
        self.verdict = (kind, system)
        if before is not None and before != self.verdict:
            self.notify(f"Vote changed from {_verdict_words(before)}: now {said}")
        else:
            self.notify(f"Marked {said}")

    def action_cancel(self) -> None:
        if self.running:
            for worker in self._workers:
                worker.cancel()
            self.notify("Cancelled the running answers")
        elif len(self.app.screen_stack) > 1:
            self.app.pop_screen()

    def action_zoom(self) -> None:
        """The focused column alone, at the screen's width (its code and tables whole); again:
        every column side by side."""
        if not self.columns:
            self.notify("No answers to zoom yet: send a question first", severity="warning")
            return
        if self.zoomed is not None:
            self.zoom(None)
        else:
            self.zoom(self._focused_column() or self.columns[0])

    def zoom(self, column: CompareColumn | None) -> None:
        """Show `column` alone (None: every column)."""
        self.zoomed = column
        for each in self.columns:
            each.display = column is None or each is column
            each.set_class(each is column, "-zoomed")
        if column is not None:
            column.query_one(".column-body").focus()
        self._show_hint()

    def _show_hint(self) -> None:
        self.query_one("#compare-hint", Static).update(self._hint())

    def _focused_column(self) -> CompareColumn | None:
        node = self.focused
        while node is not None and not isinstance(node, CompareColumn):
            node = node.parent
        return node

    def action_zoom_step(self, step: int) -> None:
        """Zoomed, tab shows the next answer (shift+tab the one before); else tab moves the focus
        (this binding hides the screen's own tab: skipping it left the focus where it was)."""
        if self.zoomed is None:
            if step > 0:
                self.focus_next()
            else:
                self.focus_previous()
            return
        self.zoom(self.columns[(self.columns.index(self.zoomed) + step) % len(self.columns)])

    def action_tree(self) -> None:
        for column in self.columns:
            if column.has_tree:
                self.open_tree(column.run_id)
                return
        self.notify("No conductor or MoA run in this comparison", severity="warning")

    @on(CompareColumn.TreeRequested)
    def _on_tree_requested(self, message: CompareColumn.TreeRequested) -> None:
        self.open_tree(message.run_id)

    def open_tree(self, run_id: str | None) -> None:
        """Show the workflow tree of stored run `run_id`."""
        from ...store import NotFoundError
        from .run_tree import RunTreeScreen

        store = self.runtime.store
        if run_id is None or store is None:
            self.notify("No recorded run to show", severity="warning")
            return
        try:
            trace = store.get_trace(run_id)
        except NotFoundError:
            self.notify("This run has not started yet", severity="warning")
            return
        self.app.push_screen(RunTreeScreen(trace))


def _branch_subtitle(trace) -> str:
    """A branch's column (engine/fork.py): which step it ran again, on which model, and that its
    figures are what the branch added to the run."""
    fork = trace.fork
    return f"step {fork.index + 1} on {fork.model or '?'} · added"


def _verdict_words(verdict: tuple[str, str | None]) -> str:
    kind, system = verdict
    return {"tie": "a tie", "all_wrong": "all wrong"}.get(kind, f"{system} better")
