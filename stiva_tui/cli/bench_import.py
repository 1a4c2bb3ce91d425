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
import sys
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
        print(f"reading {fmt} from {path} ...", file=sys.stderr)
        rows = assign_splits(rows_of(path, fmt, comma_list(args.models) if args.models else None), args.holdout)
    except RecordsError as exc:
        return fail(str(exc), EXIT_USAGE)
    try:
        store = Store.open()
    except StoreError as exc:
        return fail(str(exc), EXIT_FAILED)
    try:
        summary = import_recorded(
            store, rows, name=name, source=f"{fmt} {path.name}", prices=prices, folder=data_dir() / "imports"
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
    print(
        f"imported {summary.records} recorded answers: {summary.items} items ({splits}), {len(summary.models)} models"
    )
    print(f"  models: {', '.join(summary.models)}")
    print(f"  suite:  {summary.suite}")
    if summary.note:
        print(f"  note:   {summary.note}")
    print(f"  bench:  {summary.bench}   (use it as --pool replay:{summary.bench})")
    if summary.cost == "none":
        print("  cost:   none recorded and no prices given (--prices FILE.toml): reports compare tokens only")
    elif summary.unpriced:
        print(f"  cost:   none for {', '.join(summary.unpriced)} (no recorded cost, no price)")
    if summary.tokens_estimated:
        print(f"  tokens: {summary.tokens_estimated} counts estimated from the text (about 4 characters a token)")
    split = ["--split", "heldout"] if summary.splits.get("heldout") else []
    pool = [*(["--config", args.config] if args.config else []), "--pool", f"replay:{summary.bench}"]
    print(f"next: {command('stiva', 'bench', summary.suite, *pool, *split, '--systems', 'direct:*,oracle,random')}")
    return 0


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".jsonl", ".json", ".csv"):
        name = name.removesuffix(suffix)
    cleaned = "".join(c if c.isalnum() or c in "-_." else "-" for c in name).strip(".-") or "recorded"
    return cleaned
