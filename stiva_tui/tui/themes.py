"""Stiva's themes are data: `themes/*.toml`, each the fields of a Textual `Theme`."""

from __future__ import annotations

import tomllib
from pathlib import Path

from textual.theme import Theme

from ..core import toml_bounds
from ..core.reading import read_text

DEFAULT_THEME = "stiva-dark"
THEMES_DIR = Path(__file__).resolve().parent.parent / "themes"
THEME_LIMIT = 1024 * 1024  # bytes of a theme file
_FIELDS = {
    "primary",
    "secondary",
    "warning",
    "error",
    "success",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
    "dark",
    "luminosity_spread",
    "text_alpha",
    "variables",
}


def load_themes(folder: Path = THEMES_DIR) -> list[Theme]:
    """Every theme file in `folder`, sorted by name. A broken file raises ValueError naming it."""
    themes = []
    for file in sorted(folder.glob("*.toml")):
        try:
            data = toml_bounds.loads(read_text(file, THEME_LIMIT))  # past it: a ReadError, one line
            unknown = set(data) - _FIELDS - {"name"}
            if unknown:
                raise ValueError(f"unknown fields {sorted(unknown)}")
            themes.append(Theme(name=data.get("name", file.stem), **{k: v for k, v in data.items() if k in _FIELDS}))
        except (tomllib.TOMLDecodeError, ValueError, TypeError) as exc:
            raise ValueError(f"theme file {file}: {exc}") from None
    return themes
