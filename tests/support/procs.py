"""Real processes (Linux /proc): whether one still runs, its children, what it maps; a free port,
and reading a child's pipe until a needle comes."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def gone(pid: int, timeout: float = 15.0) -> bool:
    """True once `pid` no longer runs (gone, or a zombie no one reaped) within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        fields = _stat(pid)
        if fields is None or fields[0] == "Z":
            return True
        time.sleep(0.05)
    return False


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None and fields[1] == str(pid):
                found.append(int(entry.name))
    return found


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def maps_torch(pid: int) -> bool:
    """Whether `pid` has torch's library mapped (it imported torch)."""
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_until(stream, needle: str, timeout: float) -> str:
    """What the pipe gave until `needle` came, or `timeout` seconds passed (never blocks past it)."""
    import selectors

    selector = selectors.DefaultSelector()
    selector.register(stream, selectors.EVENT_READ)
    text = ""
    deadline = time.monotonic() + timeout
    while needle not in text and (left := deadline - time.monotonic()) > 0:
        if selector.select(left):
            chunk = os.read(stream.fileno(), 4096).decode()
            if not chunk:
                break
            text += chunk
    selector.close()
    return text
