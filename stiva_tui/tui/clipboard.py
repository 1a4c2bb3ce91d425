"""Copy text: the system clipboard when a tool for it is on PATH, else the terminal's OSC 52."""

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


def copy_text(app: App, text: str) -> str:
    """Copy `text`, without escape sequences (what a model wrote is pasted into shells: it must
    not carry one); returns where it went ("system clipboard" or "terminal clipboard")."""
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
            return "system clipboard"
        except (OSError, subprocess.SubprocessError):
            pass
    app.copy_to_clipboard(text)  # OSC 52: works over ssh in most terminals
    return "terminal clipboard"
