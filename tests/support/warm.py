"""The pool the warm worker's tests ask (`stiva ask` through `stiva_tui.cli.warm`).

    config = warm_pool(fake, tmp_path / "c.toml")

`cond` plans one step, `w1` answers "forty-two", and the config's [ask] lets a remote conductor's
asks use the worker (`warm_remote`), which leaves after `idle_s` seconds without a question.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.fakeprovider import FakeProvider, Reply
from tests.support.pool import write_lab_config

ONE_STEP = 'One step.\nmodel_id = [1]\nsubtasks = ["answer it"]\naccess_list = [[]]'


def write_warm_config(path: Path, base_url: str, idle_s: float = 60) -> Path:
    """The lab pool `cond`, `w1` at `base_url` (no embedded worker), its asks warm; returns `path`."""
    ask = {"warm_idle_s": idle_s, "warm_remote": True}
    return write_lab_config(path, base_url, ["cond", "w1"], embedded_worker=False, ask=ask)


def warm_pool(fake: FakeProvider, path: Path) -> Path:
    """`fake` answering every ask alike (`cond` plans ONE_STEP, `w1` says "forty-two", each with
    its usage) and `write_warm_config` at `path` on it; returns `path`."""
    fake.default("cond", Reply(ONE_STEP, usage=(20, 5)))
    fake.default("w1", Reply("forty-two", usage=(5, 2)))
    return write_warm_config(path, fake.base_url)
