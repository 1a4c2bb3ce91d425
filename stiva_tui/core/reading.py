"""Reading a file a user named, in bounded memory: a size cap before anything is read, lines read
to a length cap, gzip counted as it inflates, and an `.npz` checked from its headers before any
array is inflated. Every refusal is a `ReadError` (a ValueError) of one line, naming the file.

    text = read_text(path, limit=1 << 20)                # past `limit` bytes: refused unread
    with open_text(path, limit=1 << 30) as handle:       # gunzipped when gzip; `limit` counts inflated bytes
        for number, line in bounded_lines(handle, max_chars=1 << 24, source=str(path)):
            ...
    arrays = read_npz(path, {"weights": ("d", "m"), "bias": ("m",)}, sizes={"m": 3}, limit=64 << 20)

The stdlib reads here (`readline(limit)`, `zipfile`'s member sizes, numpy's `.npy` header reader);
nothing decides a size it has not been told by the file's own headers and checked first. gzip,
zipfile and numpy are imported inside the functions that use them (the config reads through here
before the app's first frame).
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["ReadError", "bounded_lines", "open_text", "read_bytes", "read_npz", "read_text", "size_words"]

_GZIP_MAGIC = b"\x1f\x8b"
_END_OF_DIRECTORY = b"PK\x05\x06"
_MAX_NPZ_MEMBERS = 64


class ReadError(ValueError):
    """A file too large to read, a line too long, or a damaged archive: one line, naming the file."""

    def __init__(self, message: str, *, source: str = "", line: int | None = None) -> None:
        self.message, self.source, self.line = message, source, line
        where = f"{source}:{line}" if source and line is not None else source
        super().__init__(f"{where}: {message}" if where else message)


def size_words(count: int) -> str:
    """`64 MiB`, `1 GiB`, `512 KiB`, `300 bytes`: a cap as the messages and docs say it."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if count >= 1 << shift:
            value = count / (1 << shift)
            return f"{value:g} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{count} bytes"


def read_bytes(path: str | Path, limit: int) -> bytes:
    """The file's bytes; a `ReadError` without reading them when it holds more than `limit`
    (by its size, and by what a read returns: a file that grows, or a device, is cut off there)."""
    source = str(path)
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > limit:
            raise ReadError(f"{size:,} bytes, more than the {size_words(limit)} read of such a file", source=source)
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ReadError(f"more than the {size_words(limit)} read of such a file", source=source)
    return data


def read_text(path: str | Path, limit: int, encoding: str = "utf-8") -> str:
    """`Path.read_text` (universal newlines) of at most `limit` bytes (`read_bytes`).
    UnicodeDecodeError as `read_text` raises it."""
    text = read_bytes(path, limit).decode(encoding)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


class _Counted(io.RawIOBase):
    """A binary stream that refuses to give more than `limit` bytes in all (gzip's inflated bytes)."""

    def __init__(self, inner: io.BufferedIOBase, raw: IO[bytes], limit: int, source: str, what: str) -> None:
        super().__init__()
        self._inner, self._raw, self._limit, self._source, self._what = inner, raw, limit, source, what
        self._count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer)
        room = self._limit + 1 - self._count
        n = self._inner.readinto(view[: max(1, min(len(view), room))])
        self._count += n
        if self._count > self._limit:
            raise ReadError(f"more than {size_words(self._limit)} {self._what}", source=self._source)
        return int(n)

    def close(self) -> None:
        try:
            self._inner.close()  # a GzipFile leaves the file it was given open
            self._raw.close()
        finally:
            super().close()


def open_text(
    path: str | Path,
    limit: int,
    encoding: str = "utf-8",
    *,
    decompress: bool = True,
    newline: str | None = None,
) -> io.TextIOWrapper:
    """The file as text, gunzipped when it is gzip (by its magic bytes, not its name) unless not
    `decompress`; reading past `limit` bytes (inflated bytes, for gzip) is a `ReadError`, and so
    is a plain file larger than that, before it is read. The caller closes it."""
    import gzip

    source = str(path)
    raw = open(path, "rb")  # noqa: SIM115 - wrapped and handed to the caller, who closes it
    try:
        magic = raw.read(2)
        raw.seek(0)
        inner: io.BufferedIOBase
        if decompress and magic == _GZIP_MAGIC:
            inner, what = gzip.GzipFile(fileobj=raw, mode="rb"), "once decompressed"
        else:
            size = os.fstat(raw.fileno()).st_size
            if size > limit:
                raise ReadError(f"{size:,} bytes, more than the {size_words(limit)} read of such a file", source=source)
            inner, what = raw, "read of such a file"
        counted = _Counted(inner, raw, limit, source, what)
    except BaseException:
        raw.close()
        raise
    return io.TextIOWrapper(io.BufferedReader(counted), encoding=encoding, newline=newline)


def bounded_lines(handle: IO[str], max_chars: int, *, source: str = "") -> Iterator[tuple[int, str]]:
    """(line number, line) for every line of `handle`, each read to at most `max_chars` characters
    (its newline aside): a longer one is a `ReadError` naming it, and nothing past the cap is read."""
    number = 0
    while True:
        line = handle.readline(max_chars + 2)  # its text and "\r\n" at most
        if not line:
            return
        number += 1
        ending = 2 if line.endswith("\r\n") else 1 if line.endswith(("\n", "\r")) else 0
        if len(line) - ending > max_chars:
            raise ReadError(f"a line longer than {max_chars:,} characters", source=source, line=number)
        yield number, line


# --- .npz -----------------------------------------------------------------------------------------


def read_npz(
    path: str | Path,
    shapes: Mapping[str, tuple[int | str, ...]],
    *,
    sizes: Mapping[str, int] | None = None,
    limit: int,
) -> dict[str, NDArray[Any]]:
    """The arrays `shapes` names from an `.npz` (numpy.savez), each checked before it is inflated:
    the archive's own member sizes (`limit` bytes in all), and each `.npy` header's dtype (numbers
    only, never objects) and shape. A shape's dimensions are ints, or names that must agree across
    arrays and with `sizes` (`{"weights": ("d", "m"), "bias": ("m",)}, sizes={"m": 3}`).
    A missing, damaged or truncated archive, a wrong shape, or one too large is a `ReadError`."""
    import struct
    import zipfile
    import zlib

    import numpy as np

    source = str(path)
    try:
        with open(path, "rb") as raw:
            _check_directory(raw, limit, source)
            with zipfile.ZipFile(raw) as archive:
                members = {info.filename: info for info in archive.infolist()}
                total = 0
                for name in shapes:
                    info = members.get(f"{name}.npy")
                    if info is None:
                        raise ReadError(f"no array {name!r} in it", source=source)
                    total += info.file_size
                if total > limit:
                    raise ReadError(
                        f"its arrays take {total:,} bytes once inflated, more than the {size_words(limit)} "
                        "read of such a file",
                        source=source,
                    )
                bound = dict(sizes or {})
                arrays: dict[str, NDArray[Any]] = {}
                for name, expected in shapes.items():
                    info = members[f"{name}.npy"]
                    with archive.open(info) as member:
                        _check_header(member, name, expected, bound, info.file_size, source)
                        member.seek(0)
                        arrays[name] = np.lib.format.read_array(member, allow_pickle=False)
                return arrays
    except ReadError:
        raise
    except FileNotFoundError:
        raise ReadError("no such file", source=source) from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, NotImplementedError) as exc:
        raise ReadError(f"a damaged archive ({_first_line(exc)})", source=source) from None
    except (OSError, ValueError, struct.error) as exc:
        raise ReadError(f"not readable ({_first_line(exc)})", source=source) from None


def _check_directory(raw: IO[bytes], limit: int, source: str) -> None:
    """The archive's size and its count of members, from its end record, before zipfile reads its
    directory (a directory of millions of tiny entries is gigabytes of ZipInfo)."""
    import struct

    raw.seek(0, os.SEEK_END)
    size = raw.tell()
    if size > limit + (1 << 20):
        raise ReadError(f"{size:,} bytes, more than the {size_words(limit)} read of such a file", source=source)
    tail = min(size, 22 + 0xFFFF)
    raw.seek(size - tail)
    data = raw.read(tail)
    at = data.rfind(_END_OF_DIRECTORY)
    if at < 0 or at + 22 > len(data):
        raise ReadError("a damaged archive (truncated: no end of its directory)", source=source)
    (entries,) = struct.unpack_from("<H", data, at + 10)
    if entries > _MAX_NPZ_MEMBERS:
        raise ReadError(f"an archive of {entries:,} members, not arrays of numbers", source=source)
    raw.seek(0)


def _check_header(
    member: IO[bytes],
    name: str,
    expected: tuple[int | str, ...],
    bound: dict[str, int],
    file_size: int,
    source: str,
) -> None:
    import numpy as np

    version = np.lib.format.read_magic(member)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(member)
    elif version == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(member)
    else:
        raise ReadError(f"array {name!r}: .npy format {version} is not read here", source=source)
    if dtype.hasobject or dtype.kind not in "biuf":
        raise ReadError(f"array {name!r} holds {dtype}, not numbers", source=source)
    if len(shape) != len(expected):
        raise ReadError(f"array {name!r} has shape {shape}, expected {len(expected)} dimensions", source=source)
    for have, want in zip(shape, expected):
        size = bound.setdefault(want, have) if isinstance(want, str) else want
        if have != size:
            named = f" ({want} = {size})" if isinstance(want, str) else ""
            raise ReadError(f"array {name!r} has shape {shape}, not {expected}{named}", source=source)
    count = 1
    for dim in shape:
        count *= dim
    if count * dtype.itemsize > file_size:
        raise ReadError(f"array {name!r}: its header claims more data than it holds", source=source)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
