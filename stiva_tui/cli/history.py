"""`stiva history`: the stored runs and conversations; show, rename or delete one.

stiva history [--json] [--limit N] [--source SOURCE]
stiva history show ID | conversations [--limit N] | rename ID TITLE | delete ID
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import get_args

from ..core import display as fmt
from ..core.terminal import printable
from ..core.words import Source
from .common import EXIT_FAILED, EXIT_USAGE, fail, stdout_console

SOURCES: tuple[str, ...] = get_args(Source)  # where a run was asked: tui, cli, api, bench, train


def add_parser(sub, common) -> None:
    history = sub.add_parser("history", parents=[common], help="the stored runs, newest first")
    history.add_argument("--json", action="store_true", help="print JSON")
    history.add_argument("--limit", type=int, default=20, help="at most this many runs (default 20)")
    history.add_argument(
        "--source",
        choices=SOURCES,
        metavar="SOURCE",
        help=f"only the runs from one place: {', '.join(SOURCES)} (a bench's runs are many)",
    )
    shows = history.add_subparsers(
        dest="history_command", metavar="{show ID, conversations, rename ID TITLE, delete ID}"
    )
    show = shows.add_parser("show", help="one run's trace with its plan, or a conversation's runs")
    show.add_argument(
        "run_id",
        metavar="ID",
        help="a run's or a conversation's id, or a unique start of one "
        "(4 characters or more), as any stiva listing prints it",
    )
    show.add_argument("--json", dest="show_json", action="store_true", help="print the trace as JSON")
    conversations = shows.add_parser("conversations", help="the conversations, newest first")
    conversations.add_argument("--json", dest="show_json", action="store_true", help="print them as JSON")
    # its own dest: a subcommand's default would overwrite `stiva history --limit N conversations`
    conversations.add_argument(
        "--limit", dest="conversations_limit", type=int, help="at most this many conversations (default 20)"
    )
    rename = shows.add_parser("rename", help="give a conversation a new title (as the app's history does)")
    rename.add_argument("run_id", metavar="ID", help="a conversation's id, or a unique start of one")
    rename.add_argument("title", metavar="TITLE", help="the new title")
    delete = shows.add_parser("delete", help="delete a conversation (its runs stay, as runs) or a run")
    delete.add_argument("run_id", metavar="ID", help="a conversation's or a run's id, or a unique start of one")


def run(args: argparse.Namespace, config=None) -> int:
    """The stored runs, newest first (`show ID`: one run's trace; `rename`, `delete`: change it).
    Reads the history alone: no pool; the config's keys only to mask them in what it shows."""
    return history(args, config)


def history(args: argparse.Namespace, config=None) -> int:
    """The stored runs, newest first (`show ID`: one run's trace; `rename`, `delete`: change it)."""
    from ..store import HistoryFault, NotFoundError, Store, StoreError

    if args.history_command in ("rename", "delete"):
        return _change_history(args)
    try:
        # Opening also marks the runs of killed processes interrupted. Only reading, it also
        # works where the history cannot be written (a full disk, a read-only folder).
        store = Store.open(reads_only=True)
    except StoreError as exc:
        return fail(str(exc), EXIT_FAILED if isinstance(exc, HistoryFault) else EXIT_USAGE)
    with store:
        if store.fault is not None:
            print(
                f"stiva: note: {store.fault.summary}: only reading it (nothing is swept or recorded)", file=sys.stderr
            )
        if getattr(args, "conversations_limit", None) is not None:
            args.limit = args.conversations_limit
        if args.limit < 1:
            return fail("--limit must be at least 1", EXIT_USAGE)
        try:
            if args.history_command == "show":
                try:
                    kind, whole = store.resolve_id(args.run_id)
                except NotFoundError as exc:
                    return fail(str(exc), EXIT_USAGE)
                shown = store.get_conversation(whole) if kind == "conversation" else store.get_trace(whole)
                if args.json or args.show_json:
                    print(shown.model_dump_json(indent=2))
                else:
                    (_print_conversation if kind == "conversation" else _print_run)(shown, _pool_secrets(config))
                return 0
            if args.history_command == "conversations":
                found = store.list_conversations(limit=args.limit)
                if args.json or args.show_json:
                    print(json.dumps([c.model_dump(mode="json") for c in found], indent=2, ensure_ascii=False))
                else:
                    _print_conversations(found)
                return 0
            runs = store.list_runs(limit=args.limit, source=args.source)
        except StoreError as exc:  # a damaged page met while reading
            return fail(str(exc), EXIT_FAILED)
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "id": r.run_id,
                        "started_at": r.created_at,
                        "source": r.source,
                        "question": r.question,
                        "status": r.status,
                        "prompt_tokens": r.prompt_tokens,
                        "completion_tokens": r.completion_tokens,
                        "cost_usd": r.cost_usd,
                    }
                    for r in runs
                ],
                indent=2,
                ensure_ascii=False,
            )
        )
    else:
        _print_runs(runs)
    return 0


def _change_history(args: argparse.Namespace) -> int:
    """`history rename ID TITLE` and `history delete ID`: what the app's history sidebar does."""
    from ..store import HistoryFault, NotFoundError, Store, StoreError

    try:
        store = Store.open()
    except StoreError as exc:
        return fail(str(exc), EXIT_FAILED if isinstance(exc, HistoryFault) else EXIT_USAGE)
    with store:
        try:
            kind, whole = store.resolve_id(args.run_id)
            if args.history_command == "rename":
                title = " ".join(args.title.split())
                if kind != "conversation":
                    return fail(
                        f"{args.run_id} is a run: only a conversation has a title "
                        "(stiva history conversations lists them)",
                        EXIT_USAGE,
                    )
                if not title:
                    return fail("the new title is empty", EXIT_USAGE)
                store.rename_conversation(whole, title)
                print(f"renamed conversation {whole}: {title}")
            elif kind == "conversation":
                store.delete_conversation(whole)
                print(f"deleted conversation {whole} (its runs stay in `stiva history`)")
            else:
                store.delete_run(whole)
                print(f"deleted run {whole}")
        except NotFoundError as exc:
            return fail(str(exc), EXIT_USAGE)
        except StoreError as exc:  # a read-only or full disk
            return fail(str(exc), EXIT_FAILED)
    return 0


# Where a listing does not fit whole: its date loses its year, then what gives way goes, in this
# order; the id, which `history show` and `ask --continue` take, never does, and the last column
# (the question, the title) is cut last, never under LAST_MIN.
RUNS_LEFT_OUT_FIRST = ("tokens", "source", "cost")
CONVERSATIONS_LEFT_OUT_FIRST = ("kind", "runs")
LAST_MIN = 20
LAST_MAX = 60
GAP = 2  # between two columns


def _print_runs(runs) -> None:
    rows = [
        {
            "id": r.run_id,
            "started": r.created_at[:16].replace("T", " "),
            "source": r.source,
            "status": r.status,
            "tokens": f"{r.prompt_tokens:,}→{r.completion_tokens:,}",
            "cost": fmt.money(r.cost_usd),
            "question": printable(" ".join(r.question.split())),
        }
        for r in runs
    ]
    _print_fitted(rows, "started", RUNS_LEFT_OUT_FIRST, right=("tokens", "cost"), empty="no runs yet")


def _print_fitted(rows: list[dict], date: str, left_out_first: tuple[str, ...], right: tuple[str, ...], empty: str):
    """`rows` (dicts in the columns' order, the id first, the text to cut last) as a table as wide
    as the output (a pipe's $COLUMNS, else 80): every column where it fits; else `date` as "12-05
    22:31", then without the columns of `left_out_first`, one after the other, saying which."""
    from rich.table import Table

    console = stdout_console()
    if not rows:
        console.print(empty, highlight=False)
        return
    columns, left_out = _fitting_columns(rows, console.width, date, left_out_first)
    last = columns[-1]
    widths = {name: _width(rows, name) for name in columns[:-1]}
    # the last column gets what is left (at most LAST_MAX, and no more than its longest)
    rest = console.width - sum(widths.values()) - GAP * (len(columns) - 1)
    widths[last] = max(LAST_MIN, min(rest, LAST_MAX, _width(rows, last)))
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in columns:
        # every width set here: the id and the date stay whole, the last column is cut with "…"
        justify = "right" if name in right else "left"
        table.add_column(name, justify=justify, no_wrap=True, overflow="ellipsis", width=widths[name])
    for row in rows:
        table.add_row(*(row[name] for name in columns))
    console.print(table, highlight=False)
    if left_out:
        console.print(
            f"[dim]{_and(left_out)} left out to fit {console.width} columns (--json has every field)[/]",
            highlight=False,
        )


def _and(words: list[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _width(rows: list[dict], name: str) -> int:
    """The column's width: its heading's, or its longest cell's."""
    return max(len(name), *(len(row[name]) for row in rows))


def _fitting_columns(
    rows: list[dict], width: int, date: str, left_out_first: tuple[str, ...]
) -> tuple[list[str], list[str]]:
    """The columns that fit in `width` with LAST_MIN of the last one: every one where they do;
    else `date` as "12-05 22:31" (the year left out: the rows are changed), then without the
    columns of `left_out_first`, one after the other. The columns shown, and those left out."""

    def needed(columns: list[str]) -> int:
        return sum(_width(rows, name) for name in columns[:-1]) + GAP * (len(columns) - 1) + LAST_MIN

    columns = list(rows[0])
    if needed(columns) <= width:
        return columns, []
    for row in rows:
        row[date] = row[date][5:]  # 2026-12-05 22:31 -> 12-05 22:31
    left_out: list[str] = []
    for name in left_out_first:
        if needed(columns) <= width:
            break
        columns.remove(name)
        left_out.append(name)
    return columns, left_out


def _pool_secrets(config) -> list[str]:
    """The keys and header values of the configured pool (none where the config or the keys
    cannot be read: the history is shown all the same). Masked in what `history show` prints, as
    they are in every answer: a run stored before answers were made printable before they were
    masked may hold a key with an escape or an invisible character between its characters."""
    from ..config import load_config
    from ..pool.registry import build_pool_sync

    try:
        pool = build_pool_sync(config if config is not None else load_config(), discover=False)
    except Exception:  # noqa: BLE001 - a broken config or keyring: the history still shows
        return []
    return [value for model in pool for value in (model.api_key, *(v for _, v in model.headers)) if value]


def _shown(text: str, secrets: list[str]) -> str:
    """`text` printable, then with `secrets` masked (keys.mask_known): in that order, so that no
    key comes back together once the escapes and invisible characters between its characters go."""
    from ..keys import mask_known

    return mask_known(text, secrets)


def _print_run(trace, secrets: list[str]) -> None:
    from rich.markdown import Markdown

    from ..store.export import run_markdown

    stdout_console().print(Markdown(_shown(run_markdown(trace, plan=True), secrets)))


def _print_conversation(conversation, secrets: list[str]) -> None:
    from rich.markdown import Markdown

    from ..store.export import run_markdown

    console = stdout_console()
    console.print(
        Markdown(
            printable(
                f"# {conversation.title or 'Untitled conversation'}\n\n"
                f"_{conversation.kind} · {conversation.id} · started "
                f"{conversation.created_at[:16].replace('T', ' ')} UTC_"
            )
        )
    )
    for n, trace in enumerate(conversation.runs, 1):  # numbered in the conversation, as its export is
        text = run_markdown(trace, plan=True)
        console.print(Markdown(_shown(f"## Question {n}" + text.removeprefix("## Question 1"), secrets)))
    if not conversation.runs:
        console.print("(no runs recorded in it)", highlight=False)


def _print_conversations(found) -> None:
    # status: how its newest run ended, as the app's history sidebar says it
    rows = [
        {
            "id": c.id,
            "updated": c.updated_at[:16].replace("T", " "),
            "kind": c.kind,
            "runs": str(c.run_count),
            "status": c.last_status or "no runs",
            "title": printable(" ".join((c.title or "(untitled)").split())),
        }
        for c in found
    ]
    _print_fitted(rows, "updated", CONVERSATIONS_LEFT_OUT_FIRST, right=("runs",), empty="no conversations yet")
