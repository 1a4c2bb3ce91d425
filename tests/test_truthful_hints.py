"""Labels and hints that tell the truth (issue 52, part 1): every hint a command prints runs as
printed; the config folder is as private as the README says; F4 says where the embedded model runs."""

from __future__ import annotations

import json
import os
import shlex
import stat
from pathlib import Path

from tests.support.cli import run_stiva


def _hint(text: str, prefix: str) -> list[str]:
    """The command a `prefix` line of `text` prints, as a shell would split it: on that line, or
    (folded to the terminal's width) on the lines after it, each but the last ending in a backslash."""
    lines = text.splitlines()
    (at,) = [i for i, line in enumerate(lines) if line.startswith(prefix.rstrip())]
    command = lines[at].removeprefix(prefix.rstrip()).strip()
    while not command or command.endswith("\\"):
        at += 1
        command = command.removesuffix("\\") + " " + lines[at].strip()
    words = shlex.split(command)
    assert words[0] == "stiva", command
    return words[1:]


def _records(tmp_path: Path, name: str = "rec.jsonl") -> Path:
    rows = []
    for index in range(8):
        question = f"What is {index} + {index}?"
        rows.append(
            {"id": f"q{index}", "question": question, "model": "big", "response": f"{2 * index}", "correct": True}
        )
        rows.append({"id": f"q{index}", "question": question, "model": "small", "response": "1", "correct": index < 3})
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_the_hints_of_bench_import_train_router_and_bench_run_as_printed(tmp_path, stiva_home):
    """`stiva train router`'s 'bench it:' said SUITE and left out --pool replay:ID, so the bench it
    suggested failed; `stiva bench import`'s 'next:' asked for --split heldout where no item was
    held out. A folder with a space in its name is quoted."""
    folder = tmp_path / "my routers"
    config = tmp_path / "c.toml"
    config.write_text("[discovery]\nenabled = false\n")
    imported = run_stiva("bench", "import", str(_records(tmp_path)), "--config", str(config))
    assert imported.returncode == 0, imported.stderr
    argv = _hint(imported.stdout, "next: ")
    assert argv[argv.index("--config") + 1] == str(config) and "--split" in argv
    benched = run_stiva(*argv)
    assert benched.returncode == 0, benched.stderr
    # `stiva bench`'s own: the report's folder it names is there
    (folder_line,) = [line for line in benched.stderr.splitlines() if " · report in " in line]
    assert (Path(folder_line.split(" · report in ", 1)[1]) / "report.md").is_file()
    bench_id = argv[argv.index("--pool") + 1].removeprefix("replay:")

    suite = argv[1]
    trained = run_stiva(
        "train", "router", suite, "--pool", f"replay:{bench_id}", "--split", "train", "--out", str(folder / "r"),
        "--config", str(config),
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    argv = _hint(trained.stdout, "bench it: ")
    assert argv[:2] == ["bench", suite] and f"replay:{bench_id}" in argv and "--split" in argv
    benched = run_stiva(*argv)
    assert benched.returncode == 0, benched.stderr
    assert f"router:{folder / 'r'}" in benched.stdout or "router:r" in benched.stdout

    # no held-out item: neither hint asks for --split heldout, and both still run
    alone = run_stiva("bench", "import", str(_records(tmp_path, "all.jsonl")), "--holdout", "0", "--name", "all")
    assert alone.returncode == 0, alone.stderr
    argv = _hint(alone.stdout, "next: ")
    assert "--split" not in argv and run_stiva(*argv).returncode == 0
    bench_id = argv[argv.index("--pool") + 1].removeprefix("replay:")
    trained = run_stiva("train", "router", argv[1], "--pool", f"replay:{bench_id}", "--out", str(folder / "all"))
    assert trained.returncode == 0, trained.stderr
    argv = _hint(trained.stdout, "bench it: ")
    assert "--split" not in argv and run_stiva(*argv).returncode == 0


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_config_folder_is_0700_and_the_config_stiva_writes_0600(stiva_home, monkeypatch):
    """The README says keys live in 0600 files in a 0700 folder; `stiva config` made the folder
    0755 and the file 0644 under the usual umask."""
    from stiva_tui import keys, paths

    os.umask(old := os.umask(0o022))
    try:
        os.umask(0o022)
        made = run_stiva("config")
        assert made.returncode == 0, made.stderr
        assert Path(made.stdout.strip()) == paths.config_file()
        assert _mode(paths.config_dir()) == 0o700 and _mode(paths.config_file()) == 0o600
        # a folder left open (an older Stiva, a hand-made one) is closed when a key is written there
        os.chmod(paths.config_dir(), 0o755)
        monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")  # no keyring: the key file
        keys.reset_backend()
        keys.set_key("openai", "sk-test-0123456789abcdef")
        assert keys.keys_file().is_file() and _mode(keys.keys_file()) == 0o600
        assert _mode(paths.config_dir()) == 0o700
    finally:
        os.umask(old)
        keys.reset_backend()


async def test_f4_says_the_embedded_model_runs_in_a_process_of_its_own(stiva_home):
    """F4 (and `stiva models` from the app's runtime) said "in-process, CPU" for the embedded
    model, which the app runs in a process of its own (model_process, on by default)."""
    from textual.widgets import DataTable

    from stiva_tui.config import parse_config
    from stiva_tui.pool.embedded import EMBEDDED_MODEL_ID
    from stiva_tui.runtime import Runtime
    from stiva_tui.tui.screens.pool import PoolScreen
    from tests.support.tui_screens import Host, wait_until

    config = parse_config({"catalog": False, "discovery": {"enabled": False}})
    assert config.model_process  # the default the app runs with
    hosted = await Runtime.create(config, model_process=True, with_store=False)
    alone = await Runtime.create(config, model_process=False, with_store=False)
    try:
        assert hosted.model_process is not None
        assert hosted.pool[EMBEDDED_MODEL_ID].reason == "own process, CPU"
        assert alone.pool[EMBEDDED_MODEL_ID].reason == "in-process, CPU"
        await hosted.pool_refresh()  # a key added: the pool is built again, and says the same
        assert hosted.pool[EMBEDDED_MODEL_ID].reason == "own process, CPU"
        app = Host(lambda: PoolScreen(hosted))
        async with app.run_test(size=(120, 30)) as pilot:
            table = app.screen.query_one("#pool-models", DataTable)
            await wait_until(pilot, lambda: table.row_count == 1)
            cells = " ".join(str(cell) for cell in table.get_row_at(0))
            assert "own process" in cells and "in-process" not in cells
    finally:
        await hosted.aclose()
        await alone.aclose()
