"""Load progress: the callback type, and transformers' progress bars forwarded to it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

# Called with a fraction in [0, 1] (None: unknown) and a message; possibly from a loading thread.
Progress = Callable[[float | None, str], None]


def report(progress: Progress | None, fraction: float | None, message: str) -> None:
    """Call `progress`, ignoring a broken display: loading must not fail over it."""
    if progress is not None:
        try:
            progress(fraction, message)
        except Exception:  # noqa: BLE001 - a broken progress display must not break loading
            pass


# --- transformers' progress bars, forwarded ------------------------------------------------------
#
# transformers draws its loading progress ("Loading weights": one tick per tensor) with its own
# tqdm wrapper, which accepts a process-wide hook. The hook below hands each bar to the progress
# callback of the thread that created it (loads run in worker threads), mapped into [lo, hi].

_progress_local = threading.local()
_hook_lock = threading.Lock()
_hook_installed = False


class _ForwardedBar:
    """A tqdm stand-in that reports its position to a stiva progress callback."""

    def __init__(self, bar: Any, iterable: Any, total: Any, desc: str, sink: tuple[Progress, float, float, str]):
        self._bar = bar
        self._iterable = iterable
        if total is None:
            try:
                total = len(iterable)
            except TypeError:
                total = None
        self._total = total
        self._desc = desc or "loading"
        self._sink = sink
        self._n = 0
        self._last = -1.0
        self._last_at = 0.0

    def _tick(self, n: int = 1) -> None:
        self._n += n
        progress, lo, hi, label = self._sink
        if not self._total:
            return
        share = min(1.0, self._n / self._total)
        now = time.monotonic()
        if share < 1.0 and share - self._last < 0.02 and now - self._last_at < 0.5:
            return  # a tick per tensor is too chatty: every 2 % or half a second is plenty
        self._last, self._last_at = share, now
        report(progress, lo + (hi - lo) * share, f"{label} — {self._desc.lower()} {self._n}/{self._total}")

    def __iter__(self):
        for item in self._iterable if self._iterable is not None else ():
            yield item
            self._tick()

    def update(self, n: int = 1) -> None:
        self._tick(n)

    def close(self) -> None:
        close = getattr(self._bar, "close", None)
        if callable(close):
            close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bar, name)


def _tqdm_hook(previous: Callable | None) -> Callable:
    def hook(factory: Callable, args: tuple, kwargs: dict) -> Any:
        bar = previous(factory, args, kwargs) if previous is not None else factory(*args, **kwargs)
        sink = getattr(_progress_local, "sink", None)
        if sink is None:
            return bar
        iterable = args[0] if args else kwargs.get("iterable")
        return _ForwardedBar(bar, iterable, kwargs.get("total"), str(kwargs.get("desc") or ""), sink)

    return hook


class forward_progress:
    """While active, transformers' progress bars in this thread report to `progress` in [lo, hi]."""

    def __init__(self, progress: Progress | None, lo: float, hi: float, label: str):
        self.sink = (progress, lo, hi, label) if progress is not None else None

    def __enter__(self) -> None:
        global _hook_installed
        if self.sink is None:
            return
        with _hook_lock:
            if not _hook_installed:
                from transformers.utils import logging as hf_logging

                setter = getattr(hf_logging, "set_tqdm_hook", None)
                if setter is None:  # an older transformers: no per-tensor progress, the rest works
                    self.sink = None
                    return
                previous = setter(None)
                setter(_tqdm_hook(previous))
                _hook_installed = True
        self.saved = getattr(_progress_local, "sink", None)
        _progress_local.sink = self.sink

    def __exit__(self, *exc: Any) -> None:
        if self.sink is not None:
            _progress_local.sink = self.saved
