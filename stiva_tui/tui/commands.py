"""The command palette's Stiva commands (ctrl+p), offered wherever the chat screen is below."""

from __future__ import annotations

from collections.abc import Callable

from textual.command import DiscoveryHit, Hit, Hits, Provider


class StivaCommands(Provider):
    def _commands(self) -> list[tuple[str, str, Callable]]:
        app = self.app
        chat = app.chat_screen
        commands: list[tuple[str, str, Callable]] = [
            ("New chat", "Start a new conversation", chat.action_new_chat),
            ("Compare systems", "The conductor beside single models and Mixture-of-Agents", app.action_compare),
            ("Toggle history", "Show or hide past conversations and compare sessions", chat.action_toggle_history),
            ("Pool of models", "Which models are available and why", app.action_pool),
            ("API keys", "Add or remove provider keys (kept in the OS keyring)", app.action_keys),
            ("Leaderboard", "Wins and losses from compare votes", app.action_leaderboard),
            ("Benches", "Reports of stiva bench: accuracy, cost and the frontier per system", app.action_bench),
            ("Export conversation as Markdown", "Write it to a .md file", lambda: chat.action_export("md")),
            ("Export conversation as JSON", "With the full trace of every run", lambda: chat.action_export("json")),
            ("Regenerate answer", "Ask the last question again, in place of its answer", chat.action_regenerate),
            (
                "Edit a question",
                "Put the last (again: an earlier) question in the prompt to ask anew",
                chat.action_edit_question,
            ),
            ("Copy last answer", "To the clipboard", chat.action_copy_answer),
            ("Copy step output", "The step selected in the tree", chat.action_copy_step),
            ("Cancel run", "Stop the running question (it stays in history)", chat.action_cancel),
            ("Help: keys and commands", "Every binding and its id", app.action_help),
        ]
        return commands

    async def discover(self) -> Hits:
        for name, help_text, callback in self._commands():
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, callback in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)
