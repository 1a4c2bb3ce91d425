"""The conversation column: the questions asked and Stiva's answers, oldest first.

answer = await view.add_question("…")   # the question, and an answer that is still coming
await view.show(conversation)           # a stored conversation (store.get_conversation)
await view.show_run(trace)              # one stored run outside any conversation
await view.clear()                      # a new chat
await view.truncate(n)                  # question n and everything after it go (regenerate, edit)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.containers import VerticalScroll

from ..text import scrub
from .answer import AnswerView, UserMessage, answer_header, stopped_note

if TYPE_CHECKING:
    from ...core.trace import Trace
    from ...store import Conversation


class ConversationView(VerticalScroll):
    """The messages of one conversation; the last `AnswerView` is the one a running question fills."""

    async def add_question(self, question: str) -> AnswerView:
        """Show `question` and an empty answer under it; returns the answer to fill."""
        answer = AnswerView()
        await self.mount_all([UserMessage(question), answer])
        self.scroll_end(animate=False)
        return answer

    async def show(self, conversation: "Conversation") -> None:
        """Replace what is shown with a stored conversation's messages (escape sequences removed)."""
        conversation = scrub(conversation)
        traces = {trace.run_id: trace for trace in conversation.runs}
        answered = {m.run_id for m in conversation.messages if m.role == "assistant"}
        widgets: list = []
        for m in conversation.messages:
            if m.role == "assistant":
                widgets.append(AnswerView(m.content, trace_header(traces.get(m.run_id or ""))))
            elif m.role == "user":
                widgets.append(UserMessage(m.content))
                trace = traces.get(m.run_id or "")
                if trace is not None and m.run_id not in answered:  # a run that gave no answer
                    widgets.append(stopped_answer(trace))
        await self.remove_children()
        await self.mount_all(widgets)
        self.scroll_end(animate=False)

    async def show_run(self, trace: "Trace") -> None:
        """Replace what is shown with one stored run that belongs to no conversation."""
        trace = scrub(trace)
        text = trace.answer or trace.last_output() or f"_No answer (run {trace.status})._"
        await self.remove_children()
        await self.mount_all([UserMessage(trace.question), AnswerView(text, trace_header(trace))])
        self.scroll_end(animate=False)

    async def clear(self) -> None:
        await self.remove_children()

    @property
    def questions(self) -> list[str]:
        """The questions shown, oldest first."""
        return [m.text for m in self.query(UserMessage)]

    def question(self, number: int) -> UserMessage | None:
        """The widget of question `number` (0-based), or None."""
        shown = list(self.query(UserMessage))
        return shown[number] if 0 <= number < len(shown) else None

    def mark_editing(self, number: int | None) -> None:
        """Mark question `number` as the one being edited (None: none), and bring it into view."""
        for index, message in enumerate(self.query(UserMessage)):
            message.set_class(index == number, "-editing")
            if index == number:
                self.scroll_to_widget(message, animate=False)

    async def truncate(self, number: int) -> None:
        """Remove question `number` (0-based) and everything shown after it."""
        first = self.question(number)
        if first is None:
            return
        children = list(self.children)
        await self.remove_children(children[children.index(first) :])

    @property
    def last_answer(self) -> str:
        """The text of the newest answer that has one ("" when there is none)."""
        answers = [a.text for a in self.query(AnswerView) if a.text]
        return answers[-1] if answers else ""


def trace_header(trace: "Trace | None") -> str:
    """The header of a stored answer: its run's steps (as planned), tokens, cost, time and, unless
    it finished, how it ended; as the live run's header said it."""
    if trace is None:
        return "Stiva"
    t = trace.totals
    steps = sum(len(r.workflow.access_list) if r.workflow is not None else len(r.steps) for r in trace.rounds)
    return answer_header(
        steps,
        t.prompt_tokens,
        t.completion_tokens,
        t.cost_usd,
        t.latency_s,
        status=_ended(trace),
        estimated=t.estimated,
    )


def stopped_answer(trace: "Trace") -> AnswerView:
    """The answer block of a stored run that gave no answer (cancelled, failed, interrupted)."""
    status = _ended(trace)
    if status == "finished":  # its answer message was not written: the run has it
        return AnswerView(trace.answer or "", trace_header(trace))
    return AnswerView(header=trace_header(trace), note=stopped_note(status, trace.error or ""), kind=status)


def _ended(trace: "Trace") -> str:
    # A run still "running" in the history is one this process never saw end.
    return "interrupted" if trace.status == "running" else trace.status
