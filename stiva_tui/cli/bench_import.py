"""`stiva bench import`: recorded answers of real models, made into a suite and a bench.

    stiva bench import FILE [--format records|routerbench|zeroeval] [--name NAME] [--holdout 0.5]
                            [--prices FILE.toml] [--models M1,M2] [--json]

The suite it prints is what `stiva bench` and `stiva train` take; the bench's id works as
`--pool replay:ID`. `main` turns `bench import` into this command before parsing (`stiva bench`
itself takes a suite as its first argument).
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import textwrap
from pathlib import Path

from .common import EXIT_FAILED, EXIT_USAGE, comma_list, command, fail

NAME = "bench-import"


def add_parser(sub, common) -> None:
    parser = sub.add_parser(
        NAME,
        parents=[common],
        prog="stiva bench import",
        description="Make a suite and a bench from recorded answers of real models (Stiva's records JSONL, "
        "RouterBench's wide CSV, or a folder of ZeroEval's result_dirs). Each answer is graded by its "
        "recorded score; the bench's id works as --pool replay:ID, so routers and conductors can be "
        "trained and benched on these answers without calling a model.",
    )
    parser.add_argument("file", metavar="FILE", help="a records .jsonl(.gz), a RouterBench .csv(.gz), or a folder")
    parser.add_argument(
        "--format",
        metavar="FORMAT",
        help="records, routerbench or zeroeval (default: a folder is zeroeval, a .csv routerbench, anything else "
        "records)",
    )
    parser.add_argument("--name", help="the suite's name (default: the file's name)")
    parser.add_argument(
        "--holdout",
        type=float,
        default=0.5,
        metavar="FRACTION",
        help="the share of items without a recorded split that go to 'heldout', by a hash of the id (default 0.5)",
    )
    parser.add_argument(
        "--prices",
        metavar="FILE.toml",
        help="[[models]] name, price_in, price_out (USD per million tokens) for records without a cost "
        "(default: the config's [[models]] prices)",
    )
    parser.add_argument("--models", metavar="M1,M2", help="import only these models")
    parser.add_argument(
        "--kind",
        choices=("choice", "number", "math", "literal", "exact", "auto"),
        help="how votes and agreement gates read every item's answers (default: inferred per item from its "
        "reference and question: an option letter is choice, one number number, an expression math, a "
        "Python literal literal, other text exact)",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")


def rewrite(argv: list[str]) -> list[str]:
    """`stiva [options] bench import ...` as this command's name (options before the command kept)."""
    takes_value = {"--config", "--conductor", "--pool", "--prefer"}
    index = 0
    while index < len(argv) and argv[index].startswith("-"):
        index += 1 if "=" in argv[index] or argv[index] not in takes_value else 2
    if argv[index : index + 2] == ["bench", "import"]:
        return [*argv[:index], NAME, *argv[index + 2 :]]
    return argv


def run(args: argparse.Namespace, config) -> int:
    from ..bench.imports import config_prices, detect_format, import_recorded, read_prices, rows_of
    from ..evals.recorded import RecordsError
    from ..evals.recorded.records import assign_splits
    from ..paths import data_dir
    from ..store import Store, StoreError

    path = Path(args.file).expanduser()
    fmt = args.format or detect_format(path)
    name = args.name or _stem(path)
    try:
        if args.prices:
            prices = read_prices(Path(args.prices).expanduser())
        else:
            prices = config_prices(config)
        print(f"reading {fmt} from {path.name} ...", file=sys.stderr)
        rows = assign_splits(rows_of(path, fmt, comma_list(args.models) if args.models else None), args.holdout)
    except RecordsError as exc:
        return fail(str(exc), EXIT_USAGE)
    try:
        store = Store.open()
    except StoreError as exc:
        return fail(str(exc), EXIT_FAILED)
    try:
        summary = import_recorded(
            store,
            rows,
            name=name,
            source=f"{fmt} {path.name}",
            prices=prices,
            folder=data_dir() / "imports",
            kind=args.kind,
        )
    except RecordsError as exc:
        return fail(str(exc), EXIT_USAGE)
    except StoreError as exc:
        return fail(f"nothing imported: {exc}", EXIT_FAILED)
    finally:
        store.close()
    if args.json:
        print(json.dumps(summary.as_json()))
        return 0
    splits = ", ".join(f"{count} {split}" for split, count in summary.splits.items())
    say = _folding()
    say(f"imported {summary.records} recorded answers: {summary.items} items ({splits}), {len(summary.models)} models")
    say(f"  models: {', '.join(summary.models)}")
    say(f"  kinds:  {', '.join(f'{count} {kind}' for kind, count in summary.kinds.items())} (--kind to set one)")
    say(f"  suite:  {summary.suite}")
    if summary.note:
        say(f"  note:   {summary.note}")
    say(f"  bench:  {summary.bench}   (use it as --pool replay:{summary.bench})")
    if summary.cost == "none":
        say("  cost:   none recorded and no prices given (--prices FILE.toml): reports compare tokens only")
    elif summary.unpriced:
        say(f"  cost:   none for {', '.join(summary.unpriced)} (no recorded cost, no price)")
    if summary.tokens_estimated:
        say(f"  tokens: {summary.tokens_estimated} counts estimated from the text (about 4 characters a token)")
    split = ["--split", "heldout"] if summary.splits.get("heldout") else []
    pool = [*(["--config", args.config] if args.config else []), "--pool", f"replay:{summary.bench}"]
    print("next:")
    _print_command(command("stiva", "bench", summary.suite, *pool, *split, "--systems", "direct:*,oracle,random"))
    return 0


def _folding():
    """A print that folds a summary line to the terminal's width, its continuation lines indented
    under the value (a 261-character list of models is many lines, never one)."""
    width = _width()

    def say(line: str) -> None:
        label = len(line) - len(line.lstrip(" ")) + (line.lstrip(" ").find(":  ") + 3 if ":  " in line else 2)
        print(textwrap.fill(line, width=width, subsequent_indent=" " * min(label, 12), break_on_hyphens=False))

    return say


def _width() -> int:
    return max(40, shutil.get_terminal_size((80, 24)).columns)


def _print_command(text: str) -> None:
    """A shell command, folded between its words with a backslash so that it pastes as it is."""
    width = _width()
    words = [shlex.quote(word) for word in shlex.split(text)]
    lines, line = [], "  " + words[0]
    for word in words[1:]:
        if len(line) + 1 + len(word) + 2 > width:
            lines.append(line + " \\")
            line = "    " + word
        else:
            line += " " + word
    lines.append(line)
    print("\n".join(lines))


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".jsonl", ".json", ".csv"):
        name = name.removesuffix(suffix)
    cleaned = "".join(c if c.isalnum() or c in "-_." else "-" for c in name).strip(".-") or "recorded"
    return cleaned
