"""`stiva serve`: the OpenAI-compatible API over the same engine (server/)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys

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

    # `stiva serve | tee log`: the token and URL lines come as they are printed, not at exit
    if hasattr(sys.stdout, "reconfigure"):
        with contextlib.suppress(ValueError, OSError):
            sys.stdout.reconfigure(line_buffering=True)
    with _server_log():
        try:
            return serve(config, args.host, args.port, args.no_auth, args.show_token, conductor=args.conductor)
        except StoreError as exc:  # the history cannot be opened: a damaged, read-only or foreign file
            return fail(str(exc), EXIT_FAILED if isinstance(exc, HistoryFault) else EXIT_USAGE)


class _ServeFormat(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        level = "" if record.levelno < logging.WARNING else f"{record.levelname.lower()}: "
        return f"stiva serve: {level}{record.getMessage()}"


@contextlib.contextmanager
def _server_log():
    """The server's own log lines on stderr, from INFO on, as uvicorn's are: the chosen conductor
    and why, once it is ready (nothing configured them, so only warnings were said before)."""
    logger = logging.getLogger("stiva.server")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_ServeFormat())
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # said once, here, not again by the last-resort handler
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
