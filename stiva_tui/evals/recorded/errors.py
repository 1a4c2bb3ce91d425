"""The one error an import raises: what is wrong, with where (file and line or record)."""

from __future__ import annotations

__all__ = ["RecordsError"]


class RecordsError(ValueError):
    """Recorded answers that cannot be imported: `source` (a file or folder) and the 1-based `line`
    where one record is at fault. Nothing is imported when one is raised."""

    def __init__(self, message: str, *, source: str = "", line: int | None = None) -> None:
        self.message, self.source, self.line = message, source, line
        where = f"{source}:{line}" if source and line is not None else source
        super().__init__(f"{where}: {message}" if where else message)
