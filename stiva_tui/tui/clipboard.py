"""Copy text: the system clipboard when a tool for it is on PATH, else the terminal's OSC 52.

Only a system clipboard tool that exited well confirms a copy. OSC 52 is a request the terminal
may ignore (many do, or only over a setting), and nothing comes back to say which: `copy_note`
says "copied" for the first only, and for OSC 52 that the terminal was asked."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from textual.app import App

from .text import safe_text


def _system_command() -> list[str] | None:
    if sys.platform == "darwin" and shutil.which("pbcopy"):
        return ["pbcopy"]
    if os.environ.get("WAYLAND_DISPLAY") and shutil.which("wl-copy"):
        return ["wl-copy"]
    if os.environ.get("DISPLAY"):
        if shutil.which("xclip"):
            return ["xclip", "-selection", "clipboard"]
        if shutil.which("xsel"):
            return ["xsel", "--clipboard", "--input"]
    return None


SYSTEM = "system clipboard"  # a tool (pbcopy, wl-copy, xclip, xsel) took it and exited well
TERMINAL = "terminal clipboard"  # sent as OSC 52: unconfirmed


def copy_note(what: str, where: str) -> str:
    """The notification after copying `what` ("Answer") to `where` (`copy_text`'s answer)."""
    if where == SYSTEM:
        return f"{what} copied to the system clipboard."
    return (
        f"{what} sent to the terminal's clipboard (OSC 52); your terminal may not support it. "
        "Install xclip, xsel or wl-copy for a copy Stiva can confirm."
    )


def copy_text(app: App, text: str) -> str:
    """Copy `text`, without escape sequences (what a model wrote is pasted into shells: it must
    not carry one); returns where it went (SYSTEM, confirmed, or TERMINAL, not confirmable)."""
    text = safe_text(text)
    command = None if os.environ.get("STIVA_NO_SYSTEM_CLIPBOARD") else _system_command()
    if command:
        try:
            subprocess.run(
                command,
                input=text.encode(),
                timeout=2,
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            return SYSTEM
        except (OSError, subprocess.SubprocessError):
            pass
    app.copy_to_clipboard(text)  # OSC 52: works over ssh in most terminals
    return TERMINAL
