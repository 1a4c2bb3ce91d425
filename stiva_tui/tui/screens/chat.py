"""The chat screen: the conversation and prompt on the left, the live workflow tree on the right.

A question runs in a worker through `runtime.sessions.ask(...)`, which keeps the conversation in
the history; its events arrive on this event loop and go to the screen's `LiveRun`, the one owner
of the run state and of the frame timer. Esc cancels the worker: the engine emits RunCancelled,
and the history keeps the partial run (its recorder saves what the steps had streamed).

The screen learns about start-up from the app's messages (`RuntimeReady`, `ConductorProgress`,
`ConductorReady`, ...) and asks the app for other screens with messages (`OpenCompare`); a
question sent before the runtime or the conductor is ready waits, and says so.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Static, Tree
from textual.worker import Worker

from .. import messages as msg
from ..bindings import keys_for
from ..exporting import export_conversation
from ..state import load_state, save_state
from ..widgets.answer import AnswerView, answer_header, stopped_note
from ..widgets.conversation import ConversationView
from ..widgets.footer import StivaFooter
from ..widgets.history import HistorySidebar
from ..widgets.prompt_input import PromptInput
from ..widgets.status_bar import ConductorLine, RunFigures, StatusBar

if TYPE_CHECKING:
    from ...core import events as ev
    from ...core.trace import Trace
    from ...runtime import Runtime
    from ..live_run import LiveRun
    from ..widgets.step_detail import StepDetail
    from ..widgets.workflow_tree import WorkflowTree

PLACEHOLDER = "Ask anything… ({send} sends, enter adds a line)"  # the live keys of `send` fill it in
PLACEHOLDER_ENTER_SENDS = "Ask anything… (enter sends, alt+enter adds a line)"  # config: enter_sends
FIRST_RUN_NOTICE = (
    "No API keys found — running offline on the embedded Gemma 270M. F5 adds a key; "
    "`stiva config --edit` {opens} {config}. (ctrl+g or a click hides this)"
)
# `--pool sim`: what it is, questions it knows, and why its plans are one step (sim/pool.py)
SIM_NOTICE = (
    "Simulated pool: sim: models answer only their suite's questions, by a known rule "
    "(anything else gets a note). Try: {questions}. The embedded conductor plans one step on "
    "short questions. (ctrl+g or a click hides this)"
)

NARROW_BELOW = 80
NARROW_HINT = f"Workflow tree hidden: it needs a terminal {NARROW_BELOW} columns wide."
CROWDED_HINT = "Workflow tree hidden beside the history: {keys} closes the history."


class ChatScreen(Screen):
    # chat.tcss (beside this file) is loaded by the app: Textual reads a screen's CSS_PATH only
    # when it is pushed, and this is the default screen.
    AUTO_FOCUS = "#prompt"
    # Under 80 columns the two panes do not fit side by side: the tree's goes, and a line says so.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW_BELOW, "-wide")]

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="cancel", tooltip="Cancel the running question"),
        Binding("ctrl+n", "new_chat", "New chat", id="new_chat", tooltip="Start a new conversation"),
        Binding("f2", "toggle_history", "History", id="history", tooltip="Show or hide the history sidebar"),
        # Priority: the prompt (a TextArea) has its own f6/f7 bindings.
        Binding(
            "f7",
            "export('md')",
            "Export MD",
            id="export_markdown",
            priority=True,
            tooltip="Export the conversation as Markdown",
        ),
        Binding(
            "f8",
            "export('json')",
            "Export JSON",
            id="export_json",
            show=False,
            tooltip="Export the conversation as JSON with full traces",
        ),
        Binding("f9", "copy_answer", "Copy answer", id="copy_answer", show=False, tooltip="Copy the last answer"),
        # ctrl+t: macOS and many terminals take F10-F12 for themselves
        Binding(
            "f10,ctrl+t",
            "copy_step",
            "Copy step",
            id="copy_step",
            show=False,
            tooltip="Copy the selected step's output",
        ),
        Binding(
            "ctrl+r",
            "regenerate",
            "Regenerate",
            id="regenerate",
            show=False,
            tooltip="Ask the last question again; the new answer takes the old one's place",
        ),
        Binding(
            "ctrl+o",
            "edit_question",
            "Edit question",
            id="edit_question",
            show=False,
            tooltip="Put the last question in the prompt to edit (again: the one before); sending it "
            "replaces that question and every later turn (their runs stay in the run history)",
        ),
        Binding(
            "ctrl+g",
            "hide_notice",
            "Hide notice",
            id="hide_notice",
            show=False,
            tooltip="Hide the first-run notice above the conversation, for good",
        ),
        Binding(
            "ctrl+f",
            "cycle_preference",
            "Prefer",
            id="prefer",
            tooltip="What the conductor optimises the next question for: best, balanced, cheap, fast or "
            "no preference (shown in the status bar)",
        ),
    ]

    preference: reactive[str | None] = reactive(None, init=False)
    """The cost and latency preference of the next question (a level, a number, None: none stated)."""

    def __init__(self, runtime: "Runtime | None" = None, *, frozen: bool = False) -> None:
        """`runtime`: None until the app posts `RuntimeReady`. `frozen`: no clocks or spinners."""
        super().__init__()
        self.runtime = runtime
        self.frozen = frozen
        self.conversation_id: str | None = None  # the history's id of the conversation shown
        self.startup_error: str | None = None
        self._started = asyncio.Event()  # the runtime is built, or could not be
        if runtime is not None:
            self._started.set()
        self._run_worker: Worker | None = None
        self._history: HistorySidebar | None = None  # mounted on first use
        self._asked: list[str] = []  # every question asked in this session, for the prompt's history
        # The tree and the step pane (and the run state they draw, whose module loads pydantic and
        # the Markdown parser): mounted right after the first frame, or at once when needed sooner.
        self.live: LiveRun | None = None
        self._workflow_lock = asyncio.Lock()

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            with Vertical(id="conversation-column"):
                yield Static(NARROW_HINT, id="narrow-hint", markup=False)
                yield Static("", id="notice", classes="-hidden", markup=False)
                yield ConversationView(id="conversation")
                enter_sends = bool(_setting(self.app, "enter_sends", False))
                yield PromptInput(
                    id="prompt",
                    enter_sends=enter_sends,
                    placeholder=PLACEHOLDER_ENTER_SENDS
                    if enter_sends
                    else PLACEHOLDER.format(send=keys_for(self.app, "send", PromptInput.SEND_KEYS)),
                )
            yield Vertical(id="workflow-column")  # the tree and the step pane: `ensure_workflow`
        yield StatusBar(id="status")
        yield StivaFooter()

    def on_mount(self) -> None:
        if self.runtime is None:
            self.status_bar.message = "starting: building the pool…"
        self.call_after_refresh(self.ensure_workflow)  # the first frame without them: it shows sooner

    async def ensure_workflow(self) -> "LiveRun":
        """Mount the workflow tree and the step pane (once) and start the `LiveRun` that draws
        into them: right after the first frame, or sooner when a question or a stored run needs them."""
        async with self._workflow_lock:
            if self.live is None:
                # Their modules (the run state with pydantic, the Markdown parser: ~70 ms) are
                # imported in a thread, which gives the event loop its turn between, so a key
                # typed meanwhile is not held up by one long import.
                await asyncio.to_thread(_import_workflow_modules)
                from ..live_run import LiveRun
                from ..widgets.step_detail import StepDetail
                from ..widgets.workflow_tree import WorkflowTree

                tree, detail = WorkflowTree(id="tree", frozen=self.frozen), StepDetail(id="detail")
                tree.forkable = True  # r on a step forks it (on_workflow_tree_fork_requested)
                await self.query_one("#workflow-column").mount(tree, detail)
                live = LiveRun(tree, detail, self.status_bar, frozen=self.frozen)
                live.attach(self)
                self.live = live
                if self.runtime is not None:
                    self._tell_tree_pool()
            return self.live

    # --- widgets -------------------------------------------------------------------------------

    @property
    def tree(self) -> "WorkflowTree":
        from ..widgets.workflow_tree import WorkflowTree

        return self.query_one("#tree", WorkflowTree)

    @property
    def detail(self) -> "StepDetail":
        from ..widgets.step_detail import StepDetail

        return self.query_one("#detail", StepDetail)

    @property
    def status_bar(self) -> StatusBar:
        return self.query_one("#status", StatusBar)

    @property
    def conversation(self) -> ConversationView:
        return self.query_one("#conversation", ConversationView)

    @property
    def prompt(self) -> PromptInput:
        return self.query_one("#prompt", PromptInput)

    @property
    def running(self) -> bool:
        return self._run_worker is not None and self._run_worker.is_running

    def action_hide_notice(self) -> None:
        """Hide the first-run notice, for good (remembered in the state file)."""
        if self.query_one("#notice", Static).has_class("-hidden"):
            return
        self._set_notice("")
        save_state(first_run_notice_hidden=True)

    def on_click(self, event) -> None:
        if getattr(event.widget, "id", None) == "notice":
            self.action_hide_notice()

    def _set_notice(self, text: str) -> None:
        """One line above the conversation (first-run hints); empty hides it."""
        notice = self.query_one("#notice", Static)
        # the keys the notices name, as the keymap has them
        text = text.replace("F5 adds", f"{keys_for(self.app, 'keys', 'F5')} adds")
        text = text.replace("(ctrl+g or", f"({keys_for(self.app, 'hide_notice', 'ctrl+g')} or")
        notice.update(text)
        notice.set_class(not text, "-hidden")

    # --- start-up news from the app ------------------------------------------------------------

    def on_runtime_ready(self, message: msg.RuntimeReady) -> None:
        self.runtime = message.runtime
        self._started.set()
        self.preference = configured_preference(self.runtime)
        self.know_pool()
        if self.runtime.simulated:  # a simulated or replayed pool: say so on every screen of it
            from ...sim.pool import pool_label

            self.status_bar.pool_label = pool_label(self.runtime.config) or ""
        if self.runtime.conductor_ready:
            self.status_bar.message = ""
        else:
            self.status_bar.message = "conductor: loading…"
        if all(m.kind == "embedded" for m in self.runtime.models) and not load_state().get("first_run_notice_hidden"):
            from ... import paths

            config = paths.config_file()
            self._set_notice(
                FIRST_RUN_NOTICE.format(config=config, opens="opens" if config.exists() else "creates and opens")
            )
        if self.runtime.simulated:
            from textual.markup import escape

            from ...sim.pool import questions_to_try

            questions = questions_to_try(self.runtime.config, 3)
            if questions:
                self._set_notice(SIM_NOTICE.format(questions=" · ".join(f'"{escape(q)}"' for q in questions)))
        for warning in self.runtime.warnings:  # a model the config names is unavailable right now
            self.notify(warning, title="Config", severity="warning", timeout=15)

    def know_pool(self) -> None:
        """Tell the tree the pool's prices and MoA's make-up (its "≈ instead" line needs them):
        at start-up, and again whenever the pool is rebuilt."""
        if self.live is not None:  # else the tree learns them when it is mounted
            self._tell_tree_pool()
        if any(m.kind != "embedded" for m in self.runtime.models):
            self._set_notice("")  # "No API keys found" is no longer true

    def _tell_tree_pool(self) -> None:
        from ...runtime import AskError, MoAMode

        assert self.runtime is not None
        self.tree.models = self.runtime.models
        try:
            self.tree.moa = self.runtime.sessions.moa_parts(MoAMode())
        except AskError:  # MoA cannot run on this pool: no MoA estimate
            self.tree.moa = None

    def action_cycle_preference(self) -> None:
        from ...core.preference import next_level

        self.preference = next_level(self.preference)

    def watch_preference(self, preference: str | None) -> None:
        self.status_bar.prefer = preference or ""

    def on_startup_failed(self, message: msg.StartupFailed) -> None:
        self.startup_error = message.error
        self._started.set()
        self.status_bar.message = f"cannot start: {message.error}"

    def on_conductor_progress(self, message: msg.ConductorProgress) -> None:
        status = self.status_bar
        status.load_shown = True
        status.load_message = message.message
        status.load_fraction = message.fraction

    def on_conductor_ready(self, message: msg.ConductorReady) -> None:
        status = self.status_bar
        status.load_shown = False
        # A remote conductor's facts are its URL: long, and on the pool screen already.
        facts = message.facts if message.backend != "remote" else ""
        status.conductor = ConductorLine(message.backend, message.model, message.reason, facts, message.change)
        status.message = ""

    def on_conductor_failed(self, message: msg.ConductorFailed) -> None:
        status = self.status_bar
        status.load_shown = False
        status.message = f"conductor failed to load: {message.error}"

    # --- asking --------------------------------------------------------------------------------

    @on(PromptInput.Submitted)
    def _submitted(self, message: PromptInput.Submitted) -> None:
        if self.running:
            self.notify(f"A question is running: {keys_for(self.app, 'cancel', 'Esc')} cancels it.", severity="warning")
            return
        message.prompt.clear()
        self.ask(message.text, replaces=message.replaces)

    def ask(self, question: str, *, replaces: int | None = None) -> Worker:
        """Run `question` in this conversation (a worker; Esc cancels it); `replaces`: the
        question (0-based) it is asked in place of, which goes with every later turn."""
        self._run_worker = self.run_worker(
            self._ask(question, replaces), group="run", exclusive=True, exit_on_error=False, name="ask"
        )
        return self._run_worker

    async def _ask(self, question: str, replaces: int | None = None) -> None:
        await self.ensure_workflow()  # a question sent before the first frame is over
        self._stop_editing()
        if replaces is not None:
            await self.conversation.truncate(replaces)
        self._asked.append(question)
        answer = await self.conversation.add_question(question)
        self._refresh_prompt_history()
        await self.live.begin(question)
        run_id, status = None, "not run"
        try:
            run_id, status = await self._run(question, answer, replaces)
        except asyncio.CancelledError:
            status = "cancelled"
            raise
        except Exception as exc:  # a bug: show it, keep the app alive
            self.log.error("question failed", exc)
            self.notify(f"{type(exc).__name__}: {exc}", title="Could not run the question", severity="error")
            await answer.set_note(f"**Could not run:** {exc}", "failed")
        finally:
            await self.live.flush()
            self.post_message(msg.RunEnded(run_id or self.live.state.run_id or None, status, self.conversation_id))
            if self._history is not None and self._history.display:
                self._history.refresh_items()

    async def _run(self, question: str, answer: AnswerView, replaces: int | None = None) -> tuple[str | None, str]:
        """Wait for the runtime and the conductor, then run; returns (run id, status)."""
        from ...conductor.base import ConductorError
        from ...runtime import Ask, AskError

        if not self._started.is_set():
            await answer.set_note("_Waiting for Stiva to start — your question runs as soon as it is ready._")
            await self._started.wait()
        runtime = self.runtime
        if runtime is None:
            await self._not_run(answer, self.startup_error or "Stiva did not start")
            return None, "not run"
        self.live.set_model_names([m.id for m in runtime.models])
        if not runtime.conductor_ready:
            await answer.set_note("_Waiting for the conductor to load — your question runs as soon as it is ready._")
        ask = Ask(
            question,
            source="tui",
            conversation_id=self.conversation_id,
            replaces=replaces,
            options={"preference": self.preference or "none"},
        )
        try:
            outcome = await runtime.sessions.ask(ask, emit=self._on_event)
        except (AskError, ConductorError) as exc:  # nothing ran: say why, keep the app usable
            await self._not_run(answer, str(exc))
            return None, "not run"
        self.conversation_id = outcome.conversation_id
        for warning in outcome.warnings:
            self.notify(warning, title="History", severity="warning")
        for note in outcome.notes:
            self.notify(note[0].upper() + note[1:] + ".", title="Offline", severity="warning", timeout=10)
        await self._show_end(answer)
        return outcome.result.run_id, outcome.result.status

    async def _not_run(self, answer: AnswerView, why: str) -> None:
        await answer.set_note(f"**Cannot run:** {why}", "failed")
        answer.set_header("Stiva · not run")

    def _on_event(self, event: "ev.Event") -> None:
        """Every engine event of the running question, on the UI's event loop."""
        from ...core import events as ev

        assert self.live is not None
        self.live.handle(event)
        if isinstance(event, ev.RunStarted):
            # Known from the first event: a cancelled run ends without an Outcome.
            self.conversation_id = event.conversation_id or self.conversation_id
            self._note_working()
        elif isinstance(event, ev.RunCancelled):
            self.call_next(self._show_end, self._last_answer())

    def _note_working(self) -> None:
        answer = self._last_answer()
        if answer is not None:
            self.call_next(self._working, answer)

    async def _working(self, answer: AnswerView) -> None:
        if self.live is not None and self.live.state.status == "running":  # not already over (a replay, a fast failure)
            await answer.set_note("_Working…_")

    def _last_answer(self) -> AnswerView | None:
        answers = self.conversation.query(AnswerView)
        return answers.last() if answers else None

    async def replay(self, question: str, events: list[ev.Event]) -> None:
        """Show a run from recorded events, as if it were running now (snapshots and demos)."""
        from ...core import events as ev

        await self.ensure_workflow()
        answer = await self.conversation.add_question(question)
        await self.live.begin(question, [m.id for m in self.runtime.models] if self.runtime else ())
        for event in events:
            self._on_event(event)
        await self.live.flush()
        if isinstance(events[-1], ev.TERMINAL_EVENTS):
            await self._show_end(answer)

    async def _show_end(self, answer: AnswerView | None) -> None:
        """The answer (or why there is none) under the question, with the run's figures."""
        from ...core import events as ev

        state = (await self.ensure_workflow()).state
        if answer is None or state.status in ("idle", "running"):
            return
        totals = state.totals or ev.Totals()
        header = answer_header(
            sum(len(r.steps) for r in state.rounds),
            totals.prompt_tokens,
            totals.completion_tokens,
            totals.cost_usd,
            totals.latency_s,
            self.frozen,
            state.status,
            totals.estimated,
        )
        if state.status == "finished":
            await answer.set_answer(state.answer, header)
        else:  # failed or cancelled: as the reopened chat shows it (ConversationView.show)
            answer.set_header(header)
            await answer.set_note(stopped_note(state.status, state.error), state.status)
        self.conversation.scroll_end(animate=False)

    # --- the tree and the step pane --------------------------------------------------------------

    @on(Tree.NodeHighlighted, "#tree")
    @on(Tree.NodeSelected, "#tree")
    async def _node_chosen(self, message: Tree.NodeHighlighted) -> None:
        key = message.node.data
        if key and key[0] in ("step", "plan") and self.live is not None:  # (None: the tree still mounting)
            await self.live.select(key)

    # --- forking a step (r in the tree) -------------------------------------------------------

    def on_workflow_tree_fork_requested(self, message: "WorkflowTree.ForkRequested") -> None:
        """(Named for Textual's dispatch: the tree's module loads after the first frame.) r on a step: choose its new model and subtask, then run the branch (engine/fork.py)."""
        from ..dialogs import ForkDialog

        if self.running:
            self.notify(f"A question is running: {keys_for(self.app, 'cancel', 'Esc')} cancels it.", severity="warning")
            return
        if self.runtime is None or self.live is None:
            self.notify("Forks run once Stiva has started.", severity="warning")
            return
        state = self.live.state
        if state.status != "finished":
            self.notify(f"Only a finished run can be forked (this one is {state.status}).", severity="warning")
            return
        step = state.step(message.round, message.index)
        step_label = f"{message.round}.{message.index + 1}" if len(state.rounds) > 1 else str(message.index + 1)
        models = [m.id for m in self.runtime.models]

        def chosen(choice: tuple[str, str] | None) -> None:
            if choice is not None:
                self.fork(message.run_id, step_label, *choice)

        self.app.push_screen(ForkDialog(step_label, step.model or "?", models, step.subtask), chosen)

    def fork(self, run_id: str, step: str, model: str, subtask: str) -> Worker:
        """Run the fork in a worker (Esc cancels it: the run stays as it was); on its end, the run
        and the branch open side by side in compare mode, where 1..9 votes between them."""
        self._run_worker = self.run_worker(
            self._fork(run_id, step, model, subtask), group="run", exclusive=True, exit_on_error=False, name="fork"
        )
        return self._run_worker

    async def _fork(self, run_id: str, step: str, model: str, subtask: str) -> None:
        from ...runtime import AskError, Fork

        assert self.runtime is not None
        sessions = self.runtime.sessions
        request = Fork(run_id, step, model, subtask=subtask, source="tui")
        try:
            _, plan = sessions.fork_plan(request)
        except AskError as exc:
            self.notify(str(exc), title="Cannot fork", severity="error")
            return
        live = await self.ensure_workflow()
        await live.begin(plan.question, plan.models)
        self.notify(f"Forking step {step} onto {model}…", timeout=3)
        try:
            outcome = await sessions.fork(request, emit=live.handle)
        except AskError as exc:
            self.notify(str(exc), title="Cannot fork", severity="error")
            return
        except asyncio.CancelledError:
            self.notify("Fork cancelled: the run is as it was.", timeout=3)
            raise
        finally:
            await live.flush()
        result = outcome.result
        if result.status != "finished":
            self.notify(result.error or result.status, title="The branch did not finish", severity="error")
            return
        start = sessions.compare_branches(outcome.original)  # the run beside every branch it has
        if start.session_id is None:
            self.notify(start.warning or "the comparison is not saved", severity="warning")
            return
        from .compare import CompareScreen

        compare = CompareScreen(self.runtime, session_id=start.session_id)
        compare.answers_first = True  # the run and its branch side by side, 1..9 ready to vote
        self.app.push_screen(compare)

    # --- actions -------------------------------------------------------------------------------

    def action_cancel(self) -> None:
        if self.running:
            assert self._run_worker is not None
            self._run_worker.cancel()
            self.notify("Cancelled.", timeout=2)
        elif self.prompt.editing is not None:
            self._stop_editing()
            self.prompt.clear()
        elif self._history is not None and self._history.display:
            self.action_toggle_history()

    def action_regenerate(self) -> None:
        """Ask the last question again, in place of it and its answer."""
        questions = self.conversation.questions
        if self.running:
            self.notify(
                f"A question is running: {keys_for(self.app, 'cancel', 'Esc')} cancels it first.", severity="warning"
            )
        elif not questions:
            self.notify("No question to ask again yet.", severity="warning")
        else:
            if self.prompt.editing is not None:  # the edit is given up: the question is asked as it was
                self._stop_editing()
                self.prompt.clear()
            self.ask(questions[-1], replaces=len(questions) - 1)

    def action_edit_question(self) -> None:
        """Put the last question in the prompt to edit; pressed again, the one before it (round
        to the last). Sending asks it in place of that question and every later turn."""
        questions = self.conversation.questions
        if not questions:
            self.notify("No question to edit yet.", severity="warning")
            return
        editing = self.prompt.editing
        number = len(questions) - 1 if editing is None or editing == 0 else editing - 1
        self.prompt.editing = number
        self.prompt.load_text(questions[number])
        self.prompt.move_cursor(self.prompt.document.end)
        self.conversation.mark_editing(number)
        self.prompt.focus()

    def _stop_editing(self) -> None:
        self.prompt.editing = None
        self.conversation.mark_editing(None)

    def _refresh_prompt_history(self) -> None:
        """Up in the empty prompt walks this chat's questions, then the session's others."""
        here = self.conversation.questions
        elsewhere = [q for q in dict.fromkeys(self._asked) if q not in here]
        self.prompt.set_history(elsewhere + here)

    async def action_new_chat(self) -> None:
        if self.running:
            self.notify(
                f"A question is running: {keys_for(self.app, 'cancel', 'Esc')} cancels it first.", severity="warning"
            )
            return
        self.conversation_id = None
        self._stop_editing()
        await self.conversation.clear()
        self._refresh_prompt_history()
        if self.live is not None:  # else the tree and the step pane come with an empty run already
            await self.live.begin("")
        self.status_bar.figures = RunFigures(label="new chat")
        self.query_one("#prompt").focus()

    async def action_toggle_history(self) -> None:
        if self._history is None:
            if self.runtime is None or self.runtime.store is None:
                self.notify("The history opens once Stiva has started.", severity="warning")
                return
            self._history = HistorySidebar(self.runtime.store, classes="sidebar")
            await self.query_one("#main").mount(self._history, before=0)
            self._history.focus()
            self.call_after_refresh(self._fit_panes)  # once the sidebar has its width
            return
        self._history.toggle()
        if not self._history.display:
            self.query_one("#prompt").focus()
        self._fit_panes()

    def on_resize(self) -> None:
        self._fit_panes()

    def _fit_panes(self) -> None:
        """With the history open, a terminal under 80 columns plus the sidebar has no room for
        the tree either: it goes, and the line above the conversation says how to bring it back."""
        history = self._history
        crowded = history is not None and history.display and self.size.width < NARROW_BELOW + history.outer_size.width
        self.set_class(crowded, "-crowded")
        hint = CROWDED_HINT.format(keys=keys_for(self.app, "history", "F2")) if crowded else NARROW_HINT
        self.query_one("#narrow-hint", Static).update(hint)

    @on(HistorySidebar.Selected)
    async def _history_chosen(self, message: HistorySidebar.Selected) -> None:
        """A past chat opens here; a compare session opens in compare mode (the app's job)."""
        message.stop()
        if message.kind == "compare":
            self.post_message(msg.OpenCompare(message.id))
        else:
            await self.load_conversation(message.id)

    @on(HistorySidebar.Deleted)
    async def _history_deleted(self, message: HistorySidebar.Deleted) -> None:
        """The chat on screen was deleted from the history: what is shown is a new chat now."""
        if message.kind == "chat" and message.id == self.conversation_id and not self.running:
            await self.action_new_chat()
            if self._history is not None:
                self._history.focus()  # the user is still in the list

    async def load_conversation(self, conversation_id: str) -> None:
        """Show a stored conversation: its messages, and the tree of its last run."""
        if not self._can_show_stored():
            return
        assert self.runtime is not None and self.runtime.store is not None
        conversation = self.runtime.store.get_conversation(conversation_id)
        self._stop_editing()
        await self.conversation.show(conversation)
        self._refresh_prompt_history()
        self.conversation_id = conversation.id
        await self._show_tree(conversation.runs[-1] if conversation.runs else None)

    def _can_show_stored(self) -> bool:
        if self.running:
            self.notify(
                f"A question is running: {keys_for(self.app, 'cancel', 'Esc')} cancels it first.", severity="warning"
            )
            return False
        if self.runtime is None or self.runtime.store is None:
            self.notify("The history opens once Stiva has started.", severity="warning")
            return False
        return True

    async def _show_tree(self, trace: "Trace | None") -> None:
        from ...core.run_state import RunState

        await (await self.ensure_workflow()).show(RunState.from_trace(trace) if trace is not None else RunState())

    async def action_export(self, kind: str) -> None:
        store = self.runtime.store if self.runtime is not None else None
        if self.conversation_id is None or store is None:
            self.notify("Nothing to export yet: ask a question first.", severity="warning")
            return
        path = await asyncio.to_thread(export_conversation, store, self.conversation_id, kind)
        self.notify(f"Exported to {path}", title="Export")

    def action_copy_answer(self) -> None:
        text = self.conversation.last_answer
        if not text:
            self.notify("No answer to copy yet.", severity="warning")
            return
        self._copy(text, "Answer")

    def action_copy_step(self) -> None:
        text = self.detail.text if self.live is not None else ""
        if not text:
            self.notify("Select a step with output first.", severity="warning")
            return
        self._copy(text, "Step output")

    def _copy(self, text: str, what: str) -> None:
        """Copy `text` and say so: "copied" only where a system clipboard tool confirmed it."""
        from ..clipboard import SYSTEM, copy_note, copy_text

        where = copy_text(self.app, text)
        self.notify(copy_note(what, where), timeout=2 if where == SYSTEM else 6)


def _import_workflow_modules() -> None:
    from .. import live_run  # noqa: F401 - imported for ensure_workflow, in a thread
    from ..widgets import step_detail, workflow_tree  # noqa: F401


def _setting(app, name: str, default):
    """A config setting the chat draws with, from an app with or without a config (StivaApp's
    `setting` does not build the defaults before the first frame)."""
    setting = getattr(app, "setting", None)
    if callable(setting):
        return setting(name)
    return getattr(getattr(app, "config", None), name, default)


def configured_preference(runtime: "Runtime") -> str | None:
    """The config's `[conductor] prefer` as the toggle shows it (None: none stated)."""
    from ...core.preference import parse_preference

    preference = parse_preference(runtime.config.conductor.prefer)
    return preference.name if preference is not None else None
