"""The app's own messages: start-up news from the app to its screens, and requests from screens
to the app. Each is a small typed `Message`; what carries engine events is the event stream itself.

Start-up, in order (the app posts them to the chat screen, which passes the news to its status
bar; they do not bubble back up to the app):

    RuntimeReady(runtime)  or  StartupFailed(error)
    ConductorProgress(fraction, message) ...   (while a local model loads)
    ConductorReady(backend, model, reason, facts)  or  ConductorFailed(error)

A question then ends with `RunEnded` (from the chat screen, bubbling up to the app).

Requests from other screens, bubbling up to the app: `OpenCompare(session_id)` (compare mode,
on a saved session), `OpenRun(run_id)` (a stored run, on a screen of its own). News from other
screens: `PoolChanged()` (the keys screen rebuilt the pool; the app tells the chat screen).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from ..runtime import Runtime


@dataclass
class RuntimeReady(Message, bubble=False):
    """The runtime is built: the pool is known and the history is open (no model is loaded yet)."""

    runtime: "Runtime"


@dataclass
class StartupFailed(Message, bubble=False):
    """The runtime could not be built (a bad config, an unreadable history); `error` says why."""

    error: str


@dataclass
class OpenQueued(Message, bubble=False):
    """A screen's key pressed while Stiva started: `action` (its action's name) runs now."""

    action: str


@dataclass
class ConductorProgress(Message, bubble=False):
    """The conductor is loading: `fraction` in [0, 1], or None when the loader cannot tell."""

    fraction: float | None
    message: str


@dataclass
class ConductorReady(Message, bubble=False):
    """The conductor is chosen and loaded: questions run at once from now on."""

    backend: str
    model: str
    reason: str  # why this backend was chosen
    facts: str  # what it runs on ("nf4 on cuda · 5.4 GB"), "" when there is nothing to say
    change: str = ""  # chosen again, and another than before: why ("a key for openai was added")


@dataclass
class ConductorFailed(Message, bubble=False):
    """The conductor could not be chosen or loaded; a question tries again and says why."""

    error: str


@dataclass
class RunEnded(Message):
    """A question of the chat ended: finished, failed, cancelled, or not run at all ("not run")."""

    run_id: str | None
    status: str
    conversation_id: str | None


@dataclass
class OpenCompare(Message):
    """Open compare mode; on a saved session (from the history) when `session_id` is given."""

    session_id: str | None = None


@dataclass
class OpenRun(Message):
    """Show stored run `run_id` on a screen of its own (its question, answer and workflow tree),
    over the screen that asked; esc goes back."""

    run_id: str


@dataclass
class PoolChanged(Message):
    """The pool was rebuilt (a key added or removed): its models, prices and MoA may differ now."""
