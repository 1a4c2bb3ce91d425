"""Which isolation this machine has: each candidate bwrap probed once per process with a real run
(the candidates, their options and the command line are `isolation`'s; the run is `launch`'s)."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from .isolation import HOW_TO_ENABLE, Isolation, _candidates, _hint, _options, landlock_abi, running_as_root
from .settings import SandboxSettings, SandboxUnavailable

__all__ = ["describe_isolation", "find_isolation", "forget_isolation"]

_found: dict[tuple, Isolation | SandboxUnavailable] = {}
_lock = threading.Lock()


def find_isolation(settings: SandboxSettings) -> Isolation:
    """The isolation runs use under `settings`; raises SandboxUnavailable where there is none.
    Probed once per process for each distinct setting (about 50 ms)."""
    if settings.unsafe:
        return Isolation("none")
    key = (settings.bwrap, settings.site_packages, settings.read_only, os.geteuid())
    with _lock:
        if key not in _found:
            try:
                _found[key] = _find(settings)
            except SandboxUnavailable as exc:
                _found[key] = exc
        found = _found[key]
    if isinstance(found, SandboxUnavailable):
        raise SandboxUnavailable(str(found))
    return found


def describe_isolation(settings: SandboxSettings) -> str:
    """One line for `stiva bench --list` and the like; never raises."""
    try:
        return find_isolation(settings).describe(settings)
    except SandboxUnavailable as exc:
        return f"unavailable: {exc}"


def forget_isolation() -> None:
    """Drop what was probed (tests that change the machine's answer)."""
    with _lock:
        _found.clear()


def _find(settings: SandboxSettings) -> Isolation:
    if sys.platform == "darwin":
        if Path("/usr/bin/sandbox-exec").exists():
            return Isolation("sandbox-exec", "/usr/bin/sandbox-exec")
        raise SandboxUnavailable(
            "no code sandbox: /usr/bin/sandbox-exec is missing; pass --unsafe-code "
            "to run model-written code WITHOUT isolation"
        )
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable(
            f"no code sandbox on {sys.platform}: only Linux (bubblewrap) and macOS "
            "(sandbox-exec) are supported; pass --unsafe-code to run model-written "
            "code WITHOUT isolation"
        )
    failures = []
    for path, source in _candidates(settings):
        found = _probe(path, source, settings)
        if isinstance(found, Isolation):
            return found
        failures.append(found)
    if not failures:
        raise SandboxUnavailable(f"no code sandbox: bubblewrap (bwrap) is not installed; {HOW_TO_ENABLE}")
    if running_as_root():
        raise SandboxUnavailable(
            "no code sandbox: Stiva runs as root, and model-written code never does: it runs under bwrap "
            "as a fresh unprivileged uid, which failed here (" + "; ".join(failures) + "). Run stiva as an "
            "ordinary user, or pass --unsafe-code to run model-written code WITHOUT isolation"
        )
    raise SandboxUnavailable("no code sandbox: " + "; ".join(failures) + f". {_hint(failures)}{HOW_TO_ENABLE}")


def _probe(path: str, source: str, settings: SandboxSettings) -> Isolation | str:
    """A real run of a tiny script through `path`: the Isolation, or why it failed (one clause)."""
    from .launch import probe_run
    from .seccomp import seccomp_program

    if not os.access(path, os.X_OK):
        return f"{path} is not an executable file"
    size, no_userns, version = _options(path)
    if not version:
        return f"{path} does not run as bubblewrap" + (" 0.5 or newer" if running_as_root() else "")
    candidate = Isolation(
        "bwrap",
        path,
        version,
        source,
        size_cap=size,
        no_userns=no_userns,
        seccomp=seccomp_program() is not None,
        drop_root=running_as_root(),
        landlock=landlock_abi(),
    )
    error = probe_run(candidate, settings)
    if error is None:
        return candidate
    return f"{source} bwrap {version} at {path} failed: {error}"
