"""The sandbox's one place to tune: limits for a whole run, what else may be read, which bwrap."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["SandboxSettings", "SandboxUnavailable"]


class SandboxUnavailable(Exception):
    """No isolation can be had here, and running unisolated was not asked for: code is refused."""


@dataclass(frozen=True, slots=True)
class SandboxSettings:
    """`[sandbox]` in the config. Every limit holds for the whole run (all its processes at once),
    not per process; `timeout_s` is the wall time of one run when an item sets none."""

    timeout_s: float = 10.0
    memory_mb: int = 512
    processes: int = 64
    disk_mb: int = 64
    # Files, folders and links in /tmp and /dev/shm together: an empty file takes no tmpfs block
    # but pins kernel memory that no other limit counts.
    files: int = 4096
    output_kb: int = 1024
    # Extra host paths bound read-only into the sandbox (a data folder a suite reads, say).
    read_only: tuple[str, ...] = field(default_factory=tuple)
    # Bind this interpreter's site-packages read-only and put them on sys.path (suites whose
    # answers import numpy and the like). Off: the code sees the standard library only.
    site_packages: bool = False
    # A bwrap to use instead of the system's or the bundled one.
    bwrap: str | None = None
    # Run model-written code WITHOUT isolation (`--unsafe-code`): a separate process with
    # resource limits, nothing more. Reports say so.
    unsafe: bool = False

    @property
    def output_bytes(self) -> int:
        return self.output_kb * 1024
