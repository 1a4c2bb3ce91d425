"""`stiva config`: create the config file if there is none, print its path, open it with --edit.

(Named config_cmd, not config: `stiva_tui.config` is the settings themselves.)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .common import EXIT_FAILED, EXIT_USAGE, fail


def add_parser(sub, common) -> None:
    configure = sub.add_parser(
        "config",
        parents=[common],
        help="create the config file if there is none, print its path, and open it with --edit",
    )
    configure.add_argument(
        "--edit", action="store_true", help="open it in $VISUAL or $EDITOR, else editor, vi or nano (as git does)"
    )


def run(args: argparse.Namespace) -> int:
    """Write the commented template where the config file belongs if there is no file yet (never
    over one), print the path, and with --edit open it. Runs before the config is loaded: a
    broken file is what one may want to open."""
    import shlex
    import subprocess

    from .. import paths
    from ..config_template import TEMPLATE

    path = Path(args.config).expanduser() if args.config else paths.config_file()
    created = False
    if not path.exists():
        try:
            # Stiva's own config folder holds the key file too: 0700, even where it was open
            # before; a folder named by --config keeps its mode. The file is 0600 from the start.
            own = path.parent == paths.config_dir()
            if own:
                paths.private_dir(path.parent, tighten=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
            # exclusive: never over a file made meanwhile
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(TEMPLATE)
            created = True
        except FileExistsError:
            pass
        except OSError as exc:
            return fail(f"cannot create {path}: {exc.strerror or exc}", EXIT_FAILED)
    print(path)
    if created:
        print("stiva: created it with every setting commented out (the defaults)", file=sys.stderr)
    if args.edit:
        editor = _editor()
        if not editor:
            return fail(
                f"no editor found ({', '.join(FALLBACK_EDITORS)}): set $EDITOR to open it, or open the path above",
                EXIT_USAGE,
            )
        try:
            return subprocess.call([*shlex.split(editor), str(path)])
        except OSError as exc:  # $EDITOR names a program that is not there
            return fail(f"cannot run the editor {editor!r}: {exc.strerror or exc}; set $EDITOR", EXIT_FAILED)
    return 0


FALLBACK_EDITORS = ("editor", "vi", "nano")  # git's order after $VISUAL and $EDITOR (Debian's `editor` first)


def _editor() -> str | None:
    """The editor to open the file with: $VISUAL, $EDITOR, else the first of `FALLBACK_EDITORS`
    on PATH; None where there is none."""
    import shutil

    for name in ("VISUAL", "EDITOR"):
        if os.environ.get(name, "").strip():
            return os.environ[name]
    return next((found for name in FALLBACK_EDITORS if (found := shutil.which(name))), None)
