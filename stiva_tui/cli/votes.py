"""`stiva votes`: the compare-mode votes, and the preference pairs they give for training.

    stiva votes [--json]

It shows how many votes the history holds and how many preference pairs of workflows they give,
per (chosen system, rejected system), with the reasons pairs are left out (train/votes.py says
which). `stiva train dpo` (train.py) trains a LoRA adapter on those pairs.
"""

from __future__ import annotations

import argparse
import json

from .common import EXIT_FAILED, EXIT_USAGE, fail


def add_parser(sub, common) -> None:
    votes = sub.add_parser(
        "votes",
        parents=[common],
        help="the compare-mode votes and the preference pairs they give for training",
        description="Each vote in compare mode says one system's plan was better than another's on that question. "
        "This counts the votes and the usable preference pairs, per pair of systems; "
        "stiva train dpo trains the conductor on them.",
    )
    votes.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace, config=None) -> int:
    """Reads the history alone: no pool, no config."""
    from ..store import HistoryFault, Store, StoreError
    from ..train.votes import read_votes

    try:
        store = Store.open(reads_only=True)
    except StoreError as exc:
        return fail(str(exc), EXIT_FAILED if isinstance(exc, HistoryFault) else EXIT_USAGE)
    try:
        with store:
            harvest = read_votes(store)
    except StoreError as exc:  # a damaged page met while reading
        return fail(str(exc), EXIT_FAILED)
    if args.json:
        print(json.dumps(harvest.as_json(), indent=2, ensure_ascii=False))
        return 0
    print(votes_text(harvest))
    return 0


def votes_text(harvest, width: int | None = None) -> str:
    """What `stiva votes` prints, each line folded to `width` (the terminal's, or `$COLUMNS`)."""
    from ..core.display import count
    from .common import fold_parts, text_width

    width = width or text_width()
    data = harvest.as_json()
    kinds = data["votes"]
    lines = fold_parts(
        [
            count(data["sessions"], "compare session"),
            f"{data['voted']} voted ({kinds['winner']} winner, {kinds['tie']} tie, {kinds['all_wrong']} all wrong)",
            count(data["pairs"], "usable preference pair"),
        ],
        width,
    )
    rows = data["by_pair"]
    if rows:
        chosen = max(len("chosen"), *(len(r["chosen"]) for r in rows))
        other = max(len("over"), *(len(r["rejected"]) for r in rows))
        head = f"{'chosen':<{chosen}}  {'over':<{other}}  {'votes':>5}  {'pairs':>5}"
        # the reasons left out stay in their column where every row fits, else each goes under its row
        cells = [
            (
                f"{r['chosen']:<{chosen}}  {r['rejected']:<{other}}  {r['votes']:>5}  {r['pairs']:>5}",
                ", ".join(f"{reason} {n}" for reason, n in r["left_out"].items()),
            )
            for r in rows
        ]
        if all(len(f"{row}  {gone}".rstrip()) <= width for row, gone in cells) and len(head) + 10 <= width:
            lines.append(f"{head}  left out")
            lines.extend(f"{row}  {gone}".rstrip() for row, gone in cells)
        else:  # a table would pass the width: each pair of systems on lines of its own
            for r, (_, gone) in zip(rows, cells, strict=True):
                lines.extend(
                    fold_parts(
                        [
                            f"{r['chosen']} over {r['rejected']}",
                            count(r["votes"], "vote"),
                            count(r["pairs"], "pair"),
                            *([f"left out: {gone}"] if gone else []),
                        ],
                        width,
                    )
                )
    whole = data["votes_without_pairs"]
    if whole:
        lines.extend(
            fold_parts(["votes that give no pair: " + ", ".join(f"{reason} {n}" for reason, n in whole.items())], width)
        )
    if data["pairs"]:
        lines.extend(
            fold_parts(["train on them:", "stiva train dpo --base embedded|HF_ID|DIR --out DIR"], width, sep=" ")
        )
    else:
        lines.extend(
            fold_parts(
                ["no pairs yet: in compare mode, mark the better answer (a winner against another system)"], width
            )
        )
    return "\n".join(lines)
