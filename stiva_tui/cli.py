"""The `stiva` command.

    stiva                      open the terminal app
    stiva ask QUESTION         plan, run and print the answer (live view on stderr; --json trace)
    stiva models [--json]      the pool, availability, prices and the conductor choice
    stiva serve                an OpenAI-compatible API over the same engine

Exit code 0 on success; otherwise non-zero with a one-line reason on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Sequence

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_CANCELLED = 130


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="FILE", help="config file (default: the platform config dir)")
    common.add_argument("--conductor", metavar="BACKEND[:MODEL]",
                        help="auto, local[:HF_ID_OR_DIR], embedded or remote:POOL_MODEL_ID")

    parser = argparse.ArgumentParser(
        prog="stiva", parents=[common],
        description="A conductor model orchestrates a pool of language models. With no command, opens the app.")
    from . import __version__

    parser.add_argument("--version", action="version", version=f"stiva {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    ask = sub.add_parser("ask", parents=[common], help="answer one question and print it")
    ask.add_argument("question", help="the question (use - to read it from stdin)")
    ask.add_argument("--json", action="store_true", help="print one JSON trace instead of the live view")
    ask.add_argument("--rounds", type=int, help="conductor rounds (default from config: 1)")
    ask.add_argument("--max-steps", type=int, help="at most this many steps per workflow (default 5)")
    ask.add_argument("--budget-usd", type=float, help="stop the run once it has cost this much")
    ask.add_argument("--budget-tokens", type=int, help="stop the run once it has used this many tokens")
    ask.add_argument("--baseline", metavar="direct:MODEL|moa",
                     help="run a baseline instead of the conductor: one model, or Mixture-of-Agents")

    models = sub.add_parser("models", parents=[common], help="list the pool and the conductor choice")
    models.add_argument("--json", action="store_true", help="print JSON")
    models.add_argument("--no-discovery", action="store_true", help="skip probing local servers")

    serve = sub.add_parser("serve", parents=[common], help="serve the OpenAI-compatible API")
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 8787)")
    serve.add_argument("--no-auth", action="store_true", help="no bearer token (loopback hosts only)")
    serve.add_argument("--show-token", action="store_true", help="print the API token and exit")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .config import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        return fail(str(exc), EXIT_USAGE)
    try:
        if args.command == "ask":
            return asyncio.run(ask(args, config))
        if args.command == "models":
            return asyncio.run(models(args, config))
        if args.command == "serve":
            from .server.app import serve

            return serve(config, args.host, args.port, args.no_auth, args.show_token, conductor=args.conductor)
        from .tui.app import run_app

        return run_app(config, args.conductor)
    except KeyboardInterrupt:
        return fail("cancelled", EXIT_CANCELLED)


def fail(message: str, code: int = EXIT_FAILED) -> int:
    first_line = message.strip().splitlines()[0] if message.strip() else "failed"
    print(f"stiva: {first_line}", file=sys.stderr)
    return code


# --- stiva ask -------------------------------------------------------------------------------------


async def ask(args: argparse.Namespace, config) -> int:
    from .conductor.base import ConductorError
    from .runtime import Runtime, StartupError
    from .store import StoreError

    question = sys.stdin.read() if args.question == "-" else args.question
    if not question.strip():
        return fail("the question is empty", EXIT_USAGE)
    try:
        runtime = await Runtime.create(config, conductor=args.conductor)
    except (StoreError, StartupError) as exc:
        return fail(str(exc), EXIT_USAGE)
    try:
        return await _ask(args, runtime, question)
    except (ConductorError, StartupError) as exc:
        return fail(str(exc), EXIT_FAILED)
    finally:
        await runtime.aclose()


async def _ask(args, runtime, question: str) -> int:
    from rich.console import Console

    from .cli_view import LiveView

    console = Console(stderr=True)
    show_live = not args.json and console.is_terminal
    options = runtime.run_options(rounds=args.rounds, max_steps=args.max_steps, budget_usd=args.budget_usd,
                                  budget_tokens=args.budget_tokens)
    baseline = args.baseline
    if baseline is None:
        with console.status("choosing the conductor…") as status:
            def progress(fraction: float | None, message: str) -> None:
                pct = f" {fraction:.0%}" if fraction is not None else ""
                status.update(f"{message}{pct}")

            conductor = await runtime.ensure_conductor(progress)
        if not args.json:
            from .conductor.select import loaded_facts

            facts = loaded_facts(conductor)
            console.print(f"[dim]conductor:[/] {conductor.backend} · {conductor.model}"
                          f"{' · ' + facts if facts else ''} — {runtime.conductor_reason}", highlight=False)
    engine = runtime.engine(source="cli")
    view = LiveView(console, question) if show_live else None
    emit = view.handle if view else None

    async def run():
        if baseline is None:
            return await engine.run(question, emit=emit, options=options)
        if baseline.startswith("direct:"):
            model_id = baseline.split(":", 1)[1]
            engine.model(model_id)  # unknown model: KeyError below, before any call
            return await engine.run_direct(question, model_id, emit=emit, options=options)
        if baseline == "moa":
            moa = runtime.config.moa
            available = [m.id for m in runtime.models]
            proposers = moa.proposers or [m for m in available if m != "local/gemma-3-270m"][:3] or available[:1]
            return await engine.run_moa(question, proposers, moa.aggregator or proposers[0], moa.layers,
                                        emit=emit, options=options)
        raise KeyError(f"unknown baseline {baseline!r}: use direct:MODEL or moa")

    try:
        if view:
            with view:
                result = await run()
        else:
            result = await run()
    except KeyError as exc:
        return fail(str(exc.args[0]), EXIT_USAGE)
    except asyncio.CancelledError:
        return fail("cancelled", EXIT_CANCELLED)

    if args.json:
        trace = runtime.store.get_trace(result.run_id)
        if runtime.conductor is not None and baseline is None:
            facts = {k: v for k, v in runtime.conductor.describe().items() if k not in ("usage",)}
            trace["conductor"] = {**facts, **trace.get("conductor", {}), "reason": runtime.conductor_reason}
        print(json.dumps(trace, indent=2, ensure_ascii=False))
    elif result.status == "finished":
        print(result.answer)
        t = result.totals
        console.print(f"[dim]{t.prompt_tokens:,} in · {t.completion_tokens:,} out"
                      f"{' (estimated)' if t.estimated else ''} · ${t.cost_usd:.4f} · {t.latency_s:.1f}s[/]")
    if result.status != "finished":
        return fail(result.error or result.status, EXIT_FAILED)
    return 0


# --- stiva models ----------------------------------------------------------------------------------


async def models(args: argparse.Namespace, config) -> int:
    from rich.console import Console

    from .conductor.select import describe_choice
    from .config import ConfigError, with_conductor_override
    from .pool.listing import models_json, models_table
    from .pool.registry import build_pool

    pool = await build_pool(config, discover=False if args.no_discovery else None)
    try:
        conductor = with_conductor_override(config.conductor, args.conductor)
    except ConfigError as exc:
        return fail(str(exc), EXIT_USAGE)
    choice = describe_choice(conductor)
    if args.json:
        print(json.dumps(models_json(pool, choice), indent=2))
    else:
        Console().print(models_table(pool, choice))
    return 0


if __name__ == "__main__":
    sys.exit(main())
