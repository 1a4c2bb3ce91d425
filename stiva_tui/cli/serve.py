"""`stiva serve`: the OpenAI-compatible API over the same engine (server/)."""

from __future__ import annotations

import argparse

from .common import EXIT_FAILED, EXIT_USAGE, fail


def add_parser(sub, common) -> None:
    serve = sub.add_parser("serve", parents=[common], help="serve the OpenAI-compatible API")
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 8787)")
    serve.add_argument("--no-auth", action="store_true", help="no bearer token (loopback hosts only)")
    serve.add_argument("--show-token", action="store_true", help="print the API token and exit")


def run(args: argparse.Namespace, config) -> int:
    from ..server.app import serve
    from ..store import HistoryFault, StoreError

    try:
        return serve(config, args.host, args.port, args.no_auth, args.show_token, conductor=args.conductor)
    except StoreError as exc:  # the history cannot be opened: a damaged, read-only or foreign file
        return fail(str(exc), EXIT_FAILED if isinstance(exc, HistoryFault) else EXIT_USAGE)
