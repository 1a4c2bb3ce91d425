"""The chat screen: the conversation and prompt on the left, the live workflow tree on the right.

A question runs in a worker: `Engine.run` emits events on this event loop, and `_on_event` folds
them into the tree at once. Step deltas are cheap (appended, marked dirty); a 20 fps timer streams
new text into the step pane and refreshes the status bar. Esc cancels the worker; the engine then
emits RunCancelled (the store records it) and the text running steps had streamed is saved.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static, Tree
from textual.worker import Worker

from ...engine import events as ev
from ...engine.run_state import RunState
from ..widgets.answer import AnswerView, UserMessage, answer_header
from ..widgets.prompt_input import PromptInput
from ..widgets.status_bar import StatusBar
from ..widgets.step_detail import StepDetail
from ..widgets.workflow_tree import FRAME_S, WorkflowTree

if TYPE_CHECKING:
    from ..app import StivaApp

PLACEHOLDER = "Ask anything… (ctrl+j or alt+enter sends, enter adds a line)"


class ChatScreen(Screen):
    # chat.tcss (beside this file) is loaded by the app: Textual reads a screen's CSS_PATH only
    # when it is pushed, and this is the default screen.
    AUTO_FOCUS = "#prompt"

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="cancel", tooltip="Cancel the running question"),
        Binding("ctrl+n", "new_chat", "New chat", id="new_chat", tooltip="Start a new conversation"),
        Binding("f2", "toggle_history", "History", id="history", tooltip="Show or hide the history sidebar"),
        # Priority: the prompt (a TextArea) has its own f6/f7 bindings.
        Binding("f7", "export('md')", "Export MD", id="export_markdown", priority=True,
                tooltip="Export the conversation as Markdown"),
        Binding("f8", "export('json')", "Export JSON", id="export_json", show=False,
                tooltip="Export the conversation as JSON with full traces"),
        Binding("f9", "copy_answer", "Copy answer", id="copy_answer", show=False,
                tooltip="Copy the last answer"),
        Binding("f10", "copy_step", "Copy step", id="copy_step", show=False,
                tooltip="Copy the selected step's output"),
    ]

    app: "StivaApp"

    def __init__(self) -> None:
        super().__init__()
        self.turns: list[dict] = []  # finished turns, sent to the engine as the conversation
        self.conversation_id: str | None = None
        self._run_worker: Worker | None = None
        self._answer: AnswerView | None = None
        self._changed: set = set()
        self._history = None  # the HistorySidebar, mounted on first use

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            with Vertical(id="conversation-column"):
                yield Static("", id="notice", classes="-hidden")
                yield VerticalScroll(id="conversation")
                yield PromptInput(id="prompt", placeholder=PLACEHOLDER)
            with Vertical(id="workflow-column"):
                yield WorkflowTree(id="tree", frozen=self.app.frozen)
                yield StepDetail(id="detail")
        yield StatusBar(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self._frame = self.set_interval(FRAME_S, self._flush, pause=True)
        self.call_after_refresh(self.app.chat_ready)  # paint first, then start the slow parts

    # --- widgets -------------------------------------------------------------------------------

    @property
    def tree(self) -> WorkflowTree:
        return self.query_one("#tree", WorkflowTree)

    @property
    def detail(self) -> StepDetail:
        return self.query_one("#detail", StepDetail)

    @property
    def status_bar(self) -> StatusBar:
        return self.query_one("#status", StatusBar)

    @property
    def running(self) -> bool:
        return self._run_worker is not None and self._run_worker.is_running

    def set_notice(self, text: str) -> None:
        """One line above the conversation (first-run hints); empty hides it."""
        notice = self.query_one("#notice", Static)
        notice.update(text)
        notice.set_class(not text, "-hidden")

    # --- asking --------------------------------------------------------------------------------

    @on(PromptInput.Submitted)
    def _submitted(self, message: PromptInput.Submitted) -> None:
        if self.running:
            self.notify("A question is running: Esc cancels it.", severity="warning")
            return
        message.prompt.clear()
        self.ask(message.text)

    def ask(self, question: str) -> Worker:
        """Run `question` (with the conversation so far) in a worker."""
        self._run_worker = self.run_worker(self._ask(question), group="run", exclusive=True,
                                           exit_on_error=False, name="ask")
        return self._run_worker

    async def _ask(self, question: str) -> None:
        try:
            await self._run_question(question)
        except Exception as exc:  # a bug or a store failure: show it, keep the app alive
            self.log.error("question failed", exc)
            self.notify(f"{type(exc).__name__}: {exc}", title="Could not run the question", severity="error")
            if self._answer is not None:
                await self._answer.set_note(f"**Could not run:** {exc}", "failed")

    async def _run_question(self, question: str) -> None:
        conversation = self.query_one("#conversation", VerticalScroll)
        answer = AnswerView()
        self._answer = answer
        await conversation.mount_all([UserMessage(question), answer])
        conversation.scroll_end(animate=False)
        self.tree.reset(question)
        await self.detail.show(self.tree.state, None)
        if self.app.runtime is not None:
            self.tree.state.model_names = [m.id for m in self.app.runtime.models]
        if not self.app.conductor_ready:
            await answer.set_note("_Waiting for the conductor to load — your question runs as soon as it is "
                                  "ready._")
        try:
            runtime = await self.app.wait_conductor()
        except Exception as exc:  # the load failed: say why, keep the app usable
            await answer.set_note(f"**Cannot run:** {exc}", "failed")
            answer.set_header("Stiva · not run")
            return
        await answer.set_note("_Working…_")
        self.tree.state.model_names = [m.id for m in runtime.models]
        store = runtime.store
        run_id = uuid.uuid4().hex
        if store is not None:
            if self.conversation_id is None:
                self.conversation_id = store.create_conversation(_title(question), "chat")
            store.add_message(self.conversation_id, "user", question, run_id)
        engine = runtime.engine(source="tui")
        self._frame.resume()
        try:
            result = await engine.run(question, emit=self._on_event, conversation=list(self.turns),
                                      options=runtime.run_options(), run_id=run_id,
                                      conversation_id=self.conversation_id if store is not None else None)
        finally:
            self._frame.pause()
            await self._flush(everything=True)
        if result.status == "finished":
            self.turns += [{"role": "user", "content": question}, {"role": "assistant", "content": result.answer}]
            if store is not None:
                store.add_message(self.conversation_id, "assistant", result.answer, run_id)
            if self._history is not None:
                self._history.refresh_items()

    async def replay(self, question: str, events: list[ev.Event]) -> None:
        """Show a run from recorded events, as if it were running now (snapshots and demos)."""
        conversation = self.query_one("#conversation", VerticalScroll)
        self._answer = AnswerView()
        await conversation.mount_all([UserMessage(question), self._answer])
        self.tree.reset(question)
        if self.app.runtime is not None:
            self.tree.state.model_names = [m.id for m in self.app.runtime.models]
        await self.detail.show(self.tree.state, None)
        for event in events:
            self._on_event(event)
        self.tree.flush()
        await self._flush()

    def _on_event(self, event: ev.Event) -> None:
        """Every engine event, on the UI's event loop."""
        keys = self.tree.handle(event)
        self._changed.update(keys)
        if isinstance(event, ev.StepDelta | ev.ConductorDelta):
            return
        if isinstance(event, ev.RunStarted):
            self.status_bar.set_conductor(event.conductor_backend, event.conductor_model,
                                          event.conductor_reason or self.app.conductor_reason)
        elif isinstance(event, ev.WorkflowReady) and self.detail.key is None and event.workflow.steps:
            key = ("step", event.round, 0)
            self.call_next(self.detail.show, self.tree.state, key)
            self.call_after_refresh(self._select, key)
        elif isinstance(event, ev.RunCancelled):
            self._save_partial_outputs(event.run_id)
        if isinstance(event, ev.TERMINAL_EVENTS):
            self.call_next(self._show_end, self.tree.state)

    def _save_partial_outputs(self, run_id: str) -> None:
        store = self.app.runtime.store if self.app.runtime else None
        if store is None:
            return
        for r in self.tree.state.rounds:
            for s in r.steps:
                if s.status == "cancelled" and s.output:
                    store.save_partial_output(run_id, s.round, s.index, s.output)

    async def _show_end(self, state: RunState) -> None:
        answer = self._answer
        self._update_status()
        if answer is None:
            return
        steps = sum(len(r.steps) for r in state.rounds)
        totals = state.totals or ev.Totals()
        header = answer_header(steps, totals.prompt_tokens, totals.completion_tokens, totals.cost_usd,
                               totals.latency_s, self.app.frozen)
        if state.status == "finished":
            await answer.set_answer(state.answer, header)
        elif state.status == "failed":
            answer.set_header(header + " · failed")
            await answer.set_note(f"**The run failed:** {state.error}", "failed")
        else:
            answer.set_header(header + " · cancelled")
            await answer.set_note("_Cancelled. The partial run is kept in the history._", "cancelled")
        self.query_one("#conversation", VerticalScroll).scroll_end(animate=False)

    async def _flush(self, everything: bool = False) -> None:
        """One frame: stream new text into the step pane, refresh the totals."""
        changed, self._changed = self._changed, set()
        await self.detail.refresh_live(None if everything else changed)
        self._update_status()

    def _update_status(self) -> None:
        state = self.tree.state
        if state.status == "idle":
            return
        seconds = None if self.app.frozen and state.totals is None else state.elapsed()
        label = {"running": "running", "failed": "failed", "cancelled": "cancelled"}.get(state.status, "")
        self.status_bar.set_totals(state.prompt_tokens, state.completion_tokens, state.cost_usd, seconds, label)

    # --- the tree and the step pane --------------------------------------------------------------

    @on(Tree.NodeHighlighted, "#tree")
    @on(Tree.NodeSelected, "#tree")
    async def _node_chosen(self, message: Tree.NodeHighlighted) -> None:
        key = message.node.data
        if key and key[0] in ("step", "plan") and key != self.detail.key:
            await self.detail.show(self.tree.state, key)

    def _select(self, key) -> None:
        node = self.tree.node_for(key)
        if node is not None:
            self.tree.move_cursor(node)

    # --- actions -------------------------------------------------------------------------------

    def action_cancel(self) -> None:
        if self.running:
            self._run_worker.cancel()
            self.notify("Cancelled.", timeout=2)
        elif self._history is not None and self._history.display:
            self.action_toggle_history()

    async def action_new_chat(self) -> None:
        if self.running:
            self.notify("A question is running: Esc cancels it first.", severity="warning")
            return
        self.turns, self.conversation_id, self._answer = [], None, None
        await self.query_one("#conversation", VerticalScroll).remove_children()
        self.tree.reset()
        await self.detail.show(self.tree.state, None)
        self.status_bar.set_totals(0, 0, 0.0, None, "new chat")
        self.query_one("#prompt").focus()

    async def action_toggle_history(self) -> None:
        if self._history is None:
            store = self.app.runtime.store if self.app.runtime else None
            if store is None:
                self.notify("The history opens once Stiva has started.", severity="warning")
                return
            try:
                from ..widgets.history import HistorySidebar
            except ImportError:
                self.notify("History is not available in this build.", severity="warning")
                return
            self._history = HistorySidebar(store)
            self._history.add_class("sidebar")
            await self.query_one("#main").mount(self._history, before=0)
            self._history.focus()
            return
        self._history.display = not self._history.display
        if self._history.display:
            self._history.refresh_items()
            self._history.focus()
        else:
            self.query_one("#prompt").focus()

    async def on_history_sidebar_selected(self, message: Any) -> None:
        """HistorySidebar.Selected(kind, id): open a past chat here, a compare session in its screen."""
        message.stop()
        if message.kind == "compare":
            self.app.action_compare(session_id=message.id)
        else:
            await self.load_conversation(message.id)

    async def load_conversation(self, conversation_id: str) -> None:
        """Show a stored conversation: its messages, and the tree of its last run."""
        if self.running:
            self.notify("A question is running: Esc cancels it first.", severity="warning")
            return
        store = self.app.runtime.store
        conv = store.get_conversation(conversation_id)
        traces = {t["run_id"]: t for t in conv["runs"]}
        conversation = self.query_one("#conversation", VerticalScroll)
        await conversation.remove_children()
        widgets, turns = [], []
        for m in conv["messages"]:
            turns.append({"role": m["role"], "content": m["content"]})
            if m["role"] == "user":
                widgets.append(UserMessage(m["content"]))
            else:
                widgets.append(AnswerView(m["content"], _stored_header(traces.get(m["run_id"]))))
        await conversation.mount_all(widgets)
        self.turns, self.conversation_id, self._answer = turns, conversation_id, None
        if conv["runs"]:
            self.tree.load_state(RunState.from_trace(conv["runs"][-1]))
            await self.detail.show(self.tree.state, None)
            self._update_status()
        else:
            self.tree.reset()

    async def action_export(self, kind: str) -> None:
        if self.conversation_id is None or self.app.runtime is None or self.app.runtime.store is None:
            self.notify("Nothing to export yet: ask a question first.", severity="warning")
            return
        from ...store.export import conversation_json, conversation_markdown

        store = self.app.runtime.store
        if kind == "json":
            import json

            text = json.dumps(conversation_json(store, self.conversation_id), indent=2, ensure_ascii=False)
        else:
            text = conversation_markdown(store, self.conversation_id)
        path = _export_path(store.get_conversation(self.conversation_id)["title"], self.conversation_id, kind)
        path.write_text(text, encoding="utf-8")
        self.notify(f"Exported to {path}", title="Export")

    def action_copy_answer(self) -> None:
        answers = [a for a in self.query(AnswerView) if a.text]
        if not answers:
            self.notify("No answer to copy yet.", severity="warning")
            return
        where = self.app.copy_text(answers[-1].text)
        self.notify(f"Answer copied to the {where}.", timeout=2)

    def action_copy_step(self) -> None:
        text = self.detail.text
        if not text:
            self.notify("Select a step with output first.", severity="warning")
            return
        where = self.app.copy_text(text)
        self.notify(f"Step output copied to the {where}.", timeout=2)


def _title(question: str) -> str:
    flat = " ".join(question.split())
    return flat if len(flat) <= 60 else flat[:59] + "…"


def _stored_header(trace: dict | None) -> str:
    if not trace:
        return "Stiva"
    totals = trace.get("totals") or {}
    steps = sum(len(r.get("steps") or []) for r in trace.get("rounds") or [])
    return answer_header(steps, totals.get("prompt_tokens", 0), totals.get("completion_tokens", 0),
                         totals.get("cost_usd", 0.0), totals.get("latency_s"))


def _export_path(title: str, conversation_id: str, kind: str) -> Path:
    """A new file in the current folder (or the data folder when that is not writable)."""
    import os

    from ... import paths

    folder = Path.cwd()
    if not os.access(folder, os.W_OK):
        folder = paths.data_dir() / "exports"
        folder.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:40] or "conversation"
    path = folder / f"stiva-{slug}-{conversation_id[:8]}.{kind}"
    n = 2
    while path.exists():
        path = folder / f"stiva-{slug}-{conversation_id[:8]}-{n}.{kind}"
        n += 1
    return path
