"""First paint and memory against elia, in one run, as a user starts each: in tmux, fresh home.

    python -m benchmarks.perf.first_paint [--elia PATH] [--runs 5] [--no-save]

Each run starts the app in a detached tmux pane (120x40) with a fresh HOME (and a fresh
STIVA_HOME for Stiva: its first start, nothing converted yet) and polls the pane every 5 ms; the
first paint is the time from the launch to the first capture with any visible character. Three
seconds after the launch it reads the resident memory of the pane's process tree (every process
under the pane's shell, /proc/PID/status VmRSS). Stiva and elia alternate, run after run, so the
load of the machine falls on both alike. `--elia` is the `elia` command of a venv of its own
(`python3 -m venv /tmp/elia-venv && /tmp/elia-venv/bin/pip install elia-chat`). A third app runs
beside them, a bare Textual App showing one line, on Stiva's Python and Textual: the floor of any
Textual app's first paint on this machine; and a fourth, Stiva with a config file (an empty one),
which it reads and validates before its first frame (with none it builds the defaults after it).

Saves first_paint.json beside itself: each app's runs, their medians, and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import HERE, STIVA, machine, save_json

OUT = HERE / "perf" / "first_paint.json"
SESSION = "stiva-first-paint"
RSS_AFTER_S = 3.0
BARE_TEXTUAL = """
from textual.app import App
from textual.widgets import Static


class Bare(App):
    def compose(self):
        yield Static("hello")


Bare().run()
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elia", default="/tmp/elia-venv/bin/elia", help="the elia command")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("needs tmux")
    apps = {"stiva": [STIVA]}
    if Path(args.elia).exists():
        apps["elia"] = [args.elia]
    else:
        print(f"no elia at {args.elia}: Stiva alone")
    # The floor of any Textual app: a bare App with one line of text, on the Python and Textual
    # that Stiva runs on.
    apps["bare_textual"] = [sys.executable, "-c", BARE_TEXTUAL]
    # Stiva with a config file (an empty one): read and validated (pydantic) before the first frame,
    # where with none the app builds the defaults after it.
    config_file = Path(tempfile.mkdtemp(prefix="first-paint-config-")) / "config.toml"
    config_file.write_text("# empty: every default\n")
    apps["stiva_with_a_config_file"] = [STIVA, "--config", str(config_file)]
    runs: dict[str, list[dict]] = {name: [] for name in apps}
    for i in range(args.runs):
        for name, command in apps.items():
            figure = one_start(command)
            runs[name].append(figure)
            print(
                f"run {i + 1} {name}: first paint {figure['first_paint_s']} s, rss at 3 s {figure['rss_mib_at_3s']} MiB"
            )
    figures: dict = {
        "what": "first paint (launch to the first visible character in a tmux pane, 120x40, polled every 5 ms) and "
        "the RSS of the app's process tree (and of its own process alone) 3 s after launch; fresh HOME (and STIVA_HOME) per run; apps alternate",
        "runs": runs,
        "median": {
            name: {
                "first_paint_s": round(statistics.median(r["first_paint_s"] for r in rows), 3),
                "rss_mib_at_3s": round(statistics.median(r["rss_mib_at_3s"] for r in rows), 1),
                "app_rss_mib_at_3s": round(statistics.median(r["app_rss_mib_at_3s"] for r in rows), 1),
            }
            for name, rows in runs.items()
        },
    }
    if "elia" in runs:
        med = figures["median"]
        figures["stiva_over_elia"] = {
            "first_paint": round(med["stiva"]["first_paint_s"] / med["elia"]["first_paint_s"], 2),
            "rss_at_3s": round(med["stiva"]["rss_mib_at_3s"] / med["elia"]["rss_mib_at_3s"], 2),
            "app_rss_at_3s": round(med["stiva"]["app_rss_mib_at_3s"] / med["elia"]["app_rss_mib_at_3s"], 2),
        }
        figures["elia_version"] = _version(args.elia)
        figures["bare_textual_over_elia"] = {
            "first_paint": round(med["bare_textual"]["first_paint_s"] / med["elia"]["first_paint_s"], 2)
        }
        figures["stiva_with_a_config_file_over_elia"] = {
            "first_paint": round(med["stiva_with_a_config_file"]["first_paint_s"] / med["elia"]["first_paint_s"], 2)
        }
    figures["stiva_imports_before_paint_ms"] = imports_before_paint()
    figures["machine"] = machine()
    print(figures["median"], figures.get("stiva_over_elia"))
    if not args.no_save:
        save_json(OUT, figures)
        print(f"saved {OUT}")
    return 0


# What `stiva` imports before its first frame, each with what it pulls in (cumulative, as
# -X importtime counts it): the command line, the config (pydantic), the app (Textual) and the chat
# screen with its widgets.
BEFORE_PAINT = ("stiva_tui.cli.main", "stiva_tui.config", "stiva_tui.tui.app", "stiva_tui.tui.screens.chat")


def imports_before_paint() -> dict:
    """The cumulative import time of each of BEFORE_PAINT, in ms, imported in that order in a
    fresh interpreter (a module imported by an earlier one counts there, not again)."""
    code = "; ".join(f"import {name}" for name in BEFORE_PAINT)
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True)
    found = {}
    for line in out.stderr.splitlines():
        parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
        if len(parts) == 3 and parts[2] in BEFORE_PAINT:
            found[parts[2]] = round(int(parts[1]) / 1000, 1)
    return found


def one_start(command: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="first-paint-") as home:
        env = {
            "HOME": home,
            "STIVA_HOME": str(Path(home) / "stiva"),
            "XDG_CONFIG_HOME": str(Path(home) / ".config"),
            "XDG_DATA_HOME": str(Path(home) / ".local" / "share"),
            "TERM": "xterm-256color",
            "PATH": os.environ.get("PATH", ""),
        }
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True)
        launch = f"env -i {exports} {shlex.join(command)}"
        started = time.monotonic()
        subprocess.run(["tmux", "new-session", "-d", "-s", SESSION, "-x", "120", "-y", "40", launch], check=True)
        first_paint = None
        while time.monotonic() - started < 30:
            screen = subprocess.run(
                ["tmux", "capture-pane", "-p", "-t", SESSION], capture_output=True, text=True
            ).stdout
            if screen.strip():
                first_paint = time.monotonic() - started
                break
            time.sleep(0.005)
        pane_pid = subprocess.run(
            ["tmux", "display", "-p", "-t", SESSION, "#{pane_pid}"], capture_output=True, text=True
        ).stdout.strip()
        time.sleep(max(0.0, RSS_AFTER_S - (time.monotonic() - started)))
        rss = _tree_rss_kib(int(pane_pid)) if pane_pid.isdigit() else 0
        own = _tree_rss_kib(int(pane_pid), alone=True) if pane_pid.isdigit() else 0
        subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True)
        time.sleep(0.5)
    return {
        "first_paint_s": round(first_paint, 3) if first_paint is not None else None,
        "rss_mib_at_3s": round(rss / 1024, 1),
        # the app's own process alone (Stiva's model loads in a child process of its own)
        "app_rss_mib_at_3s": round(own / 1024, 1),
    }


def _tree_rss_kib(root: int, alone: bool = False) -> int:
    """VmRSS of `root` and every process below it (`alone`: of `root` alone)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        if not alone:
            todo.extend(children.get(pid, []))
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


def _version(elia: str) -> str:
    pip = Path(elia).parent / "pip"
    done = subprocess.run([str(pip), "show", "elia-chat"], capture_output=True, text=True)
    return next((line.split(":", 1)[1].strip() for line in done.stdout.splitlines() if line.startswith("Version")), "")


if __name__ == "__main__":
    raise SystemExit(main())
