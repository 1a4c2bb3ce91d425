"""Messages between two of Stiva's own processes over a stream socket: length-prefixed pickles.

`stiva ask`'s warm worker (cli/warm.py, where it reads them back only as Stiva's own types) and the
model process (runtime/model_process.py, a socket pair with the child it started) speak it.
"""

from __future__ import annotations

import asyncio
import io
import pickle
import struct
from typing import Any

HEADER = struct.Struct(">I")  # the pickle's length, big-endian


def frame(message: Any) -> bytes:
    """`message` as one frame: its length, then its pickle."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data


async def read_frame(reader: asyncio.StreamReader, unpickler: type[pickle.Unpickler] = pickle.Unpickler) -> Any:
    """The next message, unpickled by `unpickler`; EOFError where the other end went away."""
    try:
        size = HEADER.unpack(await reader.readexactly(HEADER.size))[0]
        return unpickler(io.BytesIO(await reader.readexactly(size))).load()
    except (asyncio.IncompleteReadError, ConnectionError) as exc:
        raise EOFError from exc
