"""`stiva models`: the pool, which models are available, their prices, and the conductor's choice."""

from __future__ import annotations

import argparse
import json
import sys

from .common import EXIT_USAGE, fail, run_async, stdout_console


def add_parser(sub, common) -> None:
    models = sub.add_parser("models", parents=[common], help="list the pool and the conductor choice")
    models.add_argument("--json", action="store_true", help="print JSON")
    models.add_argument("--no-discovery", action="store_true", help="skip probing local servers")


def run(args: argparse.Namespace, config) -> int:
    return run_async(models(args, config))


async def models(args: argparse.Namespace, config) -> int:
    from .. import paths
    from ..conductor.choose import describe_choice
    from ..config import ConfigError, with_conductor_override
    from ..core.terminal import printable
    from ..pool.listing import models_json, models_table
    from ..pool.registry import build_pool, check_references

    pool = await build_pool(config, discover=False if args.no_discovery else None)
    try:
        conductor = with_conductor_override(config.conductor, args.conductor)
    except ConfigError as exc:
        return fail(str(exc), EXIT_USAGE)
    errors, warnings = check_references(
        config,
        pool,
        conductor.backend,
        conductor.model,
        conductor_option=args.conductor,
        fallback_model=conductor.fallback_model,
    )
    source = args.config or str(paths.config_file())
    if errors:
        return fail(errors[0] if errors[0].startswith("--conductor") else f"{source}: {errors[0]}", EXIT_USAGE)
    for warning in warnings:
        print(f"stiva: warning: {source}: {warning}", file=sys.stderr)
    choice = describe_choice(conductor, list(pool.available()))
    stores = _key_stores()
    if args.json:
        print(json.dumps({**models_json(pool, choice), "keys": stores, "left_out": list(pool.left_out)}, indent=2))
    else:
        console = stdout_console()
        console.print(models_table(pool, choice, console.width))
        for line in pool.left_out:  # a local server of another user: not asked, and how to ask it
            console.print(printable(line), markup=False, highlight=False, soft_wrap=True)
        if stores["saved_to"]:  # where each model's "key from keyring" / "key from key file" is
            read = (
                f"read from {', then '.join(stores['read_from'])}"
                if stores["read_from"]
                else "none stored yet (no keyring works here)"
            )
            saved = (
                stores["saved_to"] if stores["read_from"] else f"the private file {stores['saved_to']} (created then)"
            )
            console.print(
                f"keys: {read}; a key saved now goes to {saved}",
                markup=False,
                highlight=False,  # wrapped between words: a path shorter than a line stays whole
            )
    return 0


def _key_stores() -> dict:
    """Where stored keys are read from, in order, and where a new one is saved (see keys.py)."""
    from .. import keys

    try:
        saved_to = "the OS keyring" if keys.store_kind() == "keyring" else str(keys.keys_file())
        return {"read_from": keys.key_stores(), "saved_to": saved_to}
    except Exception:  # noqa: BLE001 - a listing detail: the models are listed all the same
        return {"read_from": [], "saved_to": None}
