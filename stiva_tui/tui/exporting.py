"""Export a conversation to a file: Markdown, or JSON with the full trace of every run."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from ..store import Store

Kind = Literal["md", "json"]


def export_conversation(store: "Store", conversation_id: str, kind: Kind | str) -> Path:
    """Write the conversation to a new file and return its path: in the current folder, or the
    data folder's `exports/` when the current one is not writable. Never overwrites a file."""
    from ..store.export import conversation_json, conversation_markdown

    if kind == "json":
        text = json.dumps(conversation_json(store, conversation_id), indent=2, ensure_ascii=False)
    else:
        text = conversation_markdown(store, conversation_id)
    path = _new_path(store.get_conversation(conversation_id).title, conversation_id, "json" if kind == "json" else "md")
    path.write_text(text, encoding="utf-8")
    return path


def _new_path(title: str, conversation_id: str, suffix: str) -> Path:
    from .. import paths

    folder = Path.cwd()
    if not os.access(folder, os.W_OK):
        folder = paths.data_dir() / "exports"
        folder.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:40] or "conversation"
    path = folder / f"stiva-{slug}-{conversation_id[:8]}.{suffix}"
    n = 2
    while path.exists():
        path = folder / f"stiva-{slug}-{conversation_id[:8]}-{n}.{suffix}"
        n += 1
    return path
