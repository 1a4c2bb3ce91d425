"""One copy of the models per user: the app and `stiva serve` use the model the warm `stiva ask`
worker already loaded, where one listens, instead of loading their own.

The worker (cli/warm.py) listens on a Unix socket of this user's (`paths.warm_socket_path`). A
front end's model process (model_process.ModelProcess) first says hello there with
`{"t": "models", "fingerprint": ...}` (core/wire.py's JSON frames); a worker of the same Stiva,
Python and model cache answers "ok" and then serves that connection as the model process would
(model_process_main.serve_stream: load, plan, chat, preload), on the models it holds (the embedded
model is loaded once per process, shared by the conductor and the worker). Anything else (no
worker, another version, no answer in time) and the front end starts its own child as before.
`STIVA_NO_WARM=1` turns this off, as it does the worker for `stiva ask`.

The worker stays while a front end is connected, and leaves `[ask] warm_idle_s` after the last
one went (as after the last ask).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import socket
import struct
import sys
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from ..core.wire import Message, frame, read_frame

WORKER_PROTOCOL = 2  # cli/warm.py's PROTOCOL: the socket its workers listen on (a test holds them equal)

HELLO_TIMEOUT_S = 5.0  # a worker that does not answer the hello in this long is not used
# What else decides which model files a process loads, and how (not its thread count: the worker
# sets its own, as the model process does).
ENV_MATTERS = ("HF_", "TRANSFORMERS_", "CUDA", "PYTORCH", "STIVA_MODEL_CACHE")


def fingerprint() -> str:
    """What a process must share with this one for its models to be this one's: Stiva's version
    and code, the Python, the model cache and the environment the loaders read."""
    from .. import __version__, paths

    env = sorted((k, v) for k, v in os.environ.items() if k.upper().startswith(ENV_MATTERS))
    parts = [__version__, sys.executable, str(Path(__file__).resolve().parent), str(paths.model_cache_dir()), env]
    return hashlib.sha256(repr(parts).encode("utf-8", "surrogateescape")).hexdigest()


def _ours(path: Path, writer: asyncio.StreamWriter) -> bool:
    """Whether the process listening at `path` runs as this user: its replies become this app's
    plans and answers.
    Linux says who the peer is; elsewhere the socket file and its folder must be this user's, the
    folder writable by no one else."""
    sock = writer.get_extra_info("socket")
    try:
        if sock is not None and hasattr(socket, "SO_PEERCRED"):
            size = struct.calcsize("3i")
            _, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, size))
            return bool(uid == os.geteuid())
        info, folder = path.stat(), path.parent.stat()
    except OSError:
        return False
    return info.st_uid == folder.st_uid == os.geteuid() and not folder.st_mode & 0o022


class ModelsHello(Message):  # as cli/warm.py's: "may I use your models?"
    t: Literal["models"] = "models"
    fingerprint: str


class Ok(Message):  # a worker of the same Stiva, Python and model cache: the calls may come
    t: Literal["ok"] = "ok"
    pid: int


class Other(Message):  # a worker of another Stiva, Python or model cache
    t: Literal["other"] = "other"


Answers: TypeAdapter[Ok | Other] = TypeAdapter(Annotated[Ok | Other, Field(discriminator="t")])


def wanted() -> bool:
    return os.environ.get("STIVA_NO_WARM", "") in ("", "0")


async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter, int] | None:
    """A connection to the warm worker that serves its models to this process (reader, writer,
    the worker's pid), or None where there is none to use."""
    if not wanted():
        return None
    from .. import paths

    path = paths.warm_socket_path(WORKER_PROTOCOL)
    try:
        reader, writer = await asyncio.open_unix_connection(str(path))
    except OSError:
        return None
    if not _ours(path, writer):  # a socket another user made (the folder under /tmp): not used
        writer.close()
        return None
    try:
        writer.write(frame(ModelsHello(fingerprint=fingerprint())))
        await writer.drain()
        reply = await asyncio.wait_for(read_frame(reader, Answers), HELLO_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - gone, silent, or not speaking this (a `refused`): not a worker to use
        writer.close()
        return None
    if isinstance(reply, Ok):
        return reader, writer, reply.pid
    with contextlib.suppress(Exception):
        writer.close()
    return None
