"""A key entered through the keys screen is used for calls, and appears nowhere else: not in the
database file, the config file, an export, or an SVG screenshot of the keys and pool screens."""

from __future__ import annotations

import json
import unicodedata
from contextlib import contextmanager

import keyring
import pytest
from textual.widgets import DataTable, Input, TextArea

from tests.support.fakeprovider import FakeProvider, Reply
from tests.support.pool import write_lab_config
from tests.support.tui_screens import PLAN, Host, make_runtime, wait_until

SECRET = "sk-leakcheck-7f3a9c1e5b2d8f4a6c0e9b7d-Z9Q1"


def _config_toml(base_url: str) -> str:
    return f"""
[conductor]
backend = "remote"
model = "cond"

[[providers]]
name = "guarded"
base_url = "{base_url}"

[[models]]
id = "cond"
provider = "guarded"
model = "cond"
description = "the planner"

[[models]]
id = "w1"
provider = "guarded"
model = "w1"
price_in = 1.0
price_out = 2.0
description = "a worker"

[discovery]
enabled = false
"""


def _assert_no_key(data: bytes | str, where: str) -> None:
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    for piece in (SECRET, SECRET[3:-4], SECRET[-12:]):  # the key, its hidden middle, a long tail
        assert piece.encode() not in data, f"the key leaked into {where}"


@pytest.fixture
def guarded():
    from stiva_tui import keys

    keys.reset_backend()
    with FakeProvider(api_key=SECRET) as server:
        server.default("cond", Reply(PLAN.replace("[1, 2]", "[1, 1]"), usage=(50, 20)))
        server.default("w1", Reply("the guarded answer", usage=(10, 3)))
        yield server
    keys.reset_backend()


async def test_a_key_from_the_keys_screen_is_used_and_never_leaks(guarded, stiva_home, tmp_path):
    from stiva_tui import paths
    from stiva_tui.config import load_config
    from stiva_tui.store.export import conversation_json, conversation_markdown
    from stiva_tui.tui.screens.compare import CompareScreen
    from stiva_tui.tui.screens.keys import KeysScreen
    from stiva_tui.tui.screens.pool import PoolScreen

    config_file = paths.config_file()
    config_file.parent.mkdir(parents=True, exist_ok=True)
    config_file.write_text(_config_toml(guarded.base_url), encoding="utf-8")
    runtime = await make_runtime(load_config())
    # Without the key the provider refuses every call (no fallback: that would be the embedded model).
    refused = await runtime.engine().run_direct("before the key", "w1", options=runtime.run_options(max_fallbacks=0))
    assert refused.status == "failed"

    app = Host(lambda: KeysScreen(runtime))
    shots = tmp_path / "shots"
    shots.mkdir()
    async with app.run_test(size=(150, 40)) as pilot:
        keys = app.screen
        await app.workers.wait_for_complete()
        keys.select_provider("guarded")
        await pilot.click("#keys-input")
        await pilot.press(*SECRET)
        app.save_screenshot("keys-typing.svg", path=str(shots))  # the password field shows dots
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert keyring.get_password("stiva", "guarded") == SECRET
        assert keys.query_one("#keys-input", Input).value == ""
        assert str(keys.query_one("#keys-table", DataTable).get_cell("guarded", "Key")) == "key in keyring: sk-…Z9Q1"
        app.save_screenshot("keys.svg", path=str(shots))

        await app.push_screen(PoolScreen(runtime))
        await pilot.pause()
        assert runtime.pool["w1"].reason == "key from keyring"
        app.save_screenshot("pool.svg", path=str(shots))

        compare = CompareScreen(runtime, systems=["conductor", "w1"])
        await app.push_screen(compare)
        compare.query_one("#compare-question", TextArea).text = "Is the key used?"
        await pilot.press("ctrl+j")
        await wait_until(pilot, lambda: len(compare.columns) == 2 and all(c.finished for c in compare.columns))
        assert [c.answer for c in compare.columns] == ["the guarded answer", "the guarded answer"]
        app.save_screenshot("compare.svg", path=str(shots))
    # The key was really sent: the provider accepted the calls only with it.
    assert guarded.requests and all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in guarded.requests)

    # A chat conversation with a run, exported both ways.
    conversation = runtime.store.create_conversation("leak check")
    result = await runtime.engine().run(
        "exported question", conversation_id=conversation, options=runtime.run_options(max_fallbacks=0)
    )
    assert result.status == "finished"
    runtime.store.add_message(conversation, "user", "exported question")
    runtime.store.add_message(conversation, "assistant", result.answer, run_id=result.run_id)
    exported_md = conversation_markdown(runtime.store, conversation)
    exported_json = json.dumps(conversation_json(runtime.store, conversation))
    assert "the guarded answer" in exported_md
    db_path = runtime.store.path
    await runtime.aclose()

    _assert_no_key(exported_md, "the Markdown export")
    _assert_no_key(exported_json, "the JSON export")
    for file in db_path.parent.glob(db_path.name + "*"):  # the database, its WAL and shm files
        _assert_no_key(file.read_bytes(), file.name)
    _assert_no_key(config_file.read_bytes(), "the config file")
    svgs = sorted(shots.glob("*.svg"))
    assert [p.name for p in svgs] == ["compare.svg", "keys-typing.svg", "keys.svg", "pool.svg"]
    for svg in svgs:
        _assert_no_key(svg.read_bytes(), svg.name)
    assert "Z9Q1" in (shots / "keys.svg").read_text()  # the masked tail is what is shown


# --- a provider that echoes the key it was sent ---------------------------------------------------

ECHOED = "lab.Token_0123456789abcdef"  # no sk- shape: only its actual value can mask it


def _echoing_config(tmp_path, base_url: str):
    provider = {"name": "lab", "base_url": base_url, "api_key_env": "LAB_ECHO_KEY"}
    return write_lab_config(tmp_path / "echo.toml", base_url, ["cond", "w1"], providers=[provider])


def test_a_key_a_provider_echoes_in_its_error_is_masked_everywhere(tmp_path, stiva_home, monkeypatch):
    """Some providers repeat the key they received when they refuse it. Whatever its shape, it
    reaches neither the terminal, the --json trace, the history file, the exports nor the API."""
    import subprocess
    import sys
    from pathlib import Path

    from stiva_tui.store import Store
    from stiva_tui.store.export import conversation_json, conversation_markdown

    monkeypatch.setenv("LAB_ECHO_KEY", ECHOED)
    refusal = Reply(status=401, error_message=f"Incorrect API key provided: {ECHOED}. Check it.")
    with FakeProvider() as fake:
        fake.default("cond", refusal)
        fake.default("w1", refusal)
        config = _echoing_config(tmp_path, fake.base_url)
        stiva = str(Path(sys.executable).parent / "stiva")
        outputs = [
            subprocess.run(
                [stiva, "ask", "Q", "--config", str(config), *extra], capture_output=True, text=True, timeout=60
            )
            for extra in ([], ["--json"], ["--baseline", "direct:w1"], ["--baseline", "direct:w1", "--json"])
        ]
        assert all(o.returncode == 1 for o in outputs)
        assert "Incorrect API key provided: [redacted]" in outputs[2].stderr  # the reason is still said
        for n, output in enumerate(outputs):
            _assert_echoed_key_absent(output.stdout + output.stderr, f"stiva ask output {n}")
        assert fake.requests[0].headers.get("authorization") == f"Bearer {ECHOED}"  # it was used

        db_path = stiva_home / "data" / "stiva.db"
        with Store.open(db_path) as store:
            for summary in store.list_conversations():
                _assert_echoed_key_absent(conversation_markdown(store, summary.id), "the Markdown export")
                _assert_echoed_key_absent(json.dumps(conversation_json(store, summary.id)), "the JSON export")
        for file in db_path.parent.rglob("*"):
            if file.is_file():
                _assert_echoed_key_absent(file.read_bytes(), file.name)


@contextmanager
def _served(w1_answers: Reply):
    """A real `stiva serve` over a provider (a FakeProvider) whose `w1` answers `w1_answers`, on
    `_echoing_config`: yields (the fake, an openai client that holds only the serve token); the
    server stops when the block ends, the provider after it."""
    import tempfile
    from pathlib import Path

    from test_server import Served

    from stiva_tui.config import load_config

    with FakeProvider() as fake:
        fake.default("w1", w1_answers)
        config = load_config(_echoing_config(Path(tempfile.mkdtemp()), fake.base_url))
        served = Served(config).start()
        try:
            yield fake, served.client()
        finally:
            served.stop()


def _served_error(error_message: str):
    """(the openai client's error, the provider's requests) when `stiva serve`, over a provider that
    answers 401 with `error_message`, is asked once."""
    import openai

    with _served(Reply(status=401, error_message=error_message)) as (fake, client):
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(model="w1", messages=[{"role": "user", "content": "hi"}])
    return caught.value, list(fake.requests)


def _assert_forms_absent(body: str, stiva_home, forms: dict[str, str]) -> None:
    """No form of the key in the API's error body nor in any file of the history, as text or UTF-16."""
    stored = [f for f in (stiva_home / "data").rglob("*") if f.is_file()]
    assert stored, "the run was not recorded"
    for where, data in [("the API's error body", body.encode()), *((f.name, f.read_bytes()) for f in stored)]:
        for name, value in forms.items():
            assert value.encode() not in data, f"the key, {name}, leaked into {where}"
            assert value.encode("utf-16-le") not in data, f"the key, {name}, leaked into {where}"


async def test_the_api_never_sends_an_echoed_key_back(monkeypatch):
    monkeypatch.setenv("LAB_ECHO_KEY", ECHOED)
    error, _ = _served_error(f"Incorrect API key provided: {ECHOED}")
    body = json.dumps(error.body)
    assert "Incorrect API key provided: [redacted]" in body
    _assert_echoed_key_absent(body, "the API's error body")


def _assert_echoed_key_absent(data: bytes | str, where: str) -> None:
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    assert ECHOED.encode() not in data, f"the echoed key leaked into {where}"


def _echoed_forms(key: str) -> dict[str, str]:
    import base64
    from urllib.parse import quote

    raw = key.encode()
    return {
        "upper-case": key.upper(),
        "lower-case": key.lower(),
        "base64": base64.b64encode(raw).decode(),
        "base64url": base64.urlsafe_b64encode(raw).decode().rstrip("="),
        "basic-auth": base64.b64encode(b"user:" + raw).decode(),
        "percent-encoded": quote(key, safe="").replace(".", "%2E"),
    }


async def test_the_api_and_the_history_never_keep_an_echoed_key_in_any_encoding(monkeypatch, stiva_home):
    """A provider that repeats the key upper-cased, in base64 and percent-encoded: `stiva serve`'s
    502 body and the history file hold none of those forms, and still say why the call failed."""
    monkeypatch.setenv("LAB_ECHO_KEY", ECHOED)
    forms = _echoed_forms(ECHOED)
    echo = "; ".join(f"{name}={value}" for name, value in forms.items())
    error, requests = _served_error(f"Incorrect API key provided ({echo})")
    assert requests and requests[0].headers.get("authorization") == f"Bearer {ECHOED}"
    assert error.status_code == 502
    body = json.dumps(error.body)
    assert "Incorrect API key provided (upper-case=[redacted]" in body  # the reason is still said
    _assert_forms_absent(body, stiva_home, {"exact": ECHOED, **forms})


# --- a provider that echoes the key in its answer (issue 50, part 7) ------------------------------


def _answer_echo(how: str):
    """A provider's reply that repeats the Authorization header it received (and its base64) in
    its answer: sent whole (one JSON object), streamed in two pieces that split the key in half,
    or streamed three characters at a time."""
    import base64

    def reply(request) -> Reply:
        sent = request.headers.get("authorization", "")
        text = f"Your request said: {sent}. In base64: {base64.b64encode(sent.encode()).decode()}. Done."
        if how == "whole":
            return Reply(text, fault="json", usage=(5, 5))
        if how == "split":
            half = text.index(ECHOED) + len(ECHOED) // 2
            return Reply(text, chunks=[text[:half], text[half:]], usage=(5, 5))
        return Reply(text, chunks=[text[i : i + 3] for i in range(0, len(text), 3)], usage=(5, 5))

    return reply


def _assert_answer_masked(data: bytes | str, where: str) -> None:
    import base64

    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    for name, value in {
        "the key": ECHOED,
        "its middle": ECHOED[3:-4],
        "the header in base64": base64.b64encode(f"Bearer {ECHOED}".encode()).decode(),
    }.items():
        assert value.encode() not in data, f"{name} leaked into {where}"
        assert value.encode("utf-16-le") not in data, f"{name} leaked into {where} (UTF-16)"


ECHO_WAYS = ["whole", "split", "pieces"]


@pytest.mark.parametrize("how", ECHO_WAYS)
def test_a_key_a_provider_echoes_in_its_answer_reaches_neither_stiva_ask_nor_the_history(
    how, tmp_path, stiva_home, monkeypatch
):
    import subprocess
    import sys
    from pathlib import Path

    monkeypatch.setenv("LAB_ECHO_KEY", ECHOED)
    with FakeProvider() as fake:
        fake.default("w1", _answer_echo(how))
        config = _echoing_config(tmp_path, fake.base_url)
        stiva = str(Path(sys.executable).parent / "stiva")
        outputs = [
            subprocess.run(
                [stiva, "ask", "Echo my key", "--config", str(config), "--baseline", "direct:w1", *extra],
                capture_output=True,
                text=True,
                timeout=60,
            )
            for extra in ([], ["--json"])
        ]
        assert fake.requests and all(r.headers.get("authorization") == f"Bearer {ECHOED}" for r in fake.requests)
    for n, output in enumerate(outputs):
        assert output.returncode == 0, output.stderr
        assert "Your request said: Bearer [redacted]. In base64: QmVhcmVyI[redacted]. Done." in output.stdout
        _assert_answer_masked(output.stdout + output.stderr, f"stiva ask output {n}")
    db_path = stiva_home / "data" / "stiva.db"
    stored = [f for f in db_path.parent.rglob("*") if f.is_file()]
    assert db_path in stored, "the runs were not recorded"
    for file in stored:
        _assert_answer_masked(file.read_bytes(), file.name)


@pytest.mark.parametrize("how", ECHO_WAYS)
async def test_the_api_never_sends_back_a_key_echoed_in_an_answer(how, monkeypatch, stiva_home):
    """`stiva serve` answers a client that holds only the serve token: the provider's key the
    provider repeated is masked in the reply, streamed or not, and in the history it keeps."""
    monkeypatch.setenv("LAB_ECHO_KEY", ECHOED)
    with _served(_answer_echo(how)) as (fake, client):
        messages = [{"role": "user", "content": "Echo my key"}]
        whole = client.chat.completions.create(model="w1", messages=messages)
        chunks = list(client.chat.completions.create(model="w1", messages=messages, stream=True))
    assert len(fake.requests) == 2 and fake.requests[0].headers.get("authorization") == f"Bearer {ECHOED}"
    answer = whole.choices[0].message.content
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    for reply in (answer, streamed):
        assert reply == "Your request said: Bearer [redacted]. In base64: QmVhcmVyI[redacted]. Done."
    _assert_answer_masked(whole.model_dump_json(), "the API's reply")
    _assert_answer_masked(json.dumps([c.model_dump() for c in chunks]), "the API's streamed reply")
    stored = [f for f in (stiva_home / "data").rglob("*") if f.is_file()]
    assert stored, "the runs were not recorded"
    for file in stored:
        _assert_answer_masked(file.read_bytes(), file.name)


async def test_an_error_that_echoes_the_key_reversed_spaced_base32_or_as_utf16_hex_is_masked(monkeypatch, stiva_home):
    """The copies issue 50 found still leaking in error bodies: `stiva serve`'s 502 body and the
    history hold none of them, and still say why the call failed."""
    import base64

    monkeypatch.setenv("LAB_ECHO_KEY", ECHOED)
    forms = {
        "reversed": ECHOED[::-1],
        "spaced": " ".join(ECHOED),
        "base32": base64.b32encode(ECHOED.encode()).decode(),
        "utf16-hex": ECHOED.encode("utf-16-le").hex(),
    }
    echo = "; ".join(f"{name}={value}" for name, value in forms.items())
    assert len(f"Incorrect API key provided ({echo})") < 500  # the client keeps 500 characters of it
    error, _ = _served_error(f"Incorrect API key provided ({echo})")
    body = json.dumps(error.body)
    assert "Incorrect API key provided (reversed=[redacted]; spaced=[redacted]; base32=[redacted]" in body
    _assert_forms_absent(body, stiva_home, forms)


# --- a key woven with escapes or invisible characters (issue 56, item 6) --------------------------

# What a provider may put between each two characters of the key it echoes: each hid the key from
# the mask, and the terminal sanitizer (or the reader's terminal) then put it back together.
WEAVES = {
    "csi": "\x1b[0m",
    "osc": "\x1b]0;t\x07",
    "zero-width": "\u200b\u200c\u200d\u2060",  # more than the three a spaced copy may hold
    "bom": "\ufeff",
    "soft-hyphen": "\u00ad",
    "bidi": "\u2066\u202a\u202c\u2069",
}
WOVEN_ANSWER = "Your key: [redacted]. Done."


def _woven(how: str) -> str:
    return WEAVES[how].join(ECHOED)


def _woven_answer(how: str) -> Reply:
    """The key woven in an answer streamed three characters at a time: the pieces split the key,
    and the escape sequences too."""
    text = f"Your key: {_woven(how)}. Done."
    return Reply(text, chunks=[text[i : i + 3] for i in range(0, len(text), 3)], usage=(5, 5))


def _as_read(text: str) -> str:
    """What a reader sees of `text`: without escape sequences and characters that show nothing."""
    import re

    text = re.sub(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)", "", text)
    return "".join(ch for ch in text if ch in "\n\t" or unicodedata.category(ch) not in ("Cc", "Cf"))


def _assert_woven_key_absent(text: str, where: str) -> None:
    shown = _as_read(text)
    assert ECHOED not in shown and ECHOED[3:-4] not in shown, f"the woven key shows in {where}"
    assert not any(unicodedata.category(ch) == "Cf" for ch in text), f"invisible characters reach {where}"


@pytest.mark.parametrize("how", WEAVES)
def test_a_key_woven_with_escapes_or_invisible_characters_reaches_neither_ask_nor_history_show(
    how, tmp_path, stiva_home, monkeypatch
):
    from tests.support.cli import run_stiva

    monkeypatch.setenv("LAB_ECHO_KEY", ECHOED)
    with FakeProvider() as fake:
        fake.default("w1", _woven_answer(how))
        config = str(_echoing_config(tmp_path, fake.base_url))
        asked = run_stiva("ask", "Echo my key", "--config", config, "--baseline", "direct:w1", home=stiva_home)
        assert asked.returncode == 0, asked.stderr
        assert WOVEN_ANSWER in asked.stdout
        _assert_woven_key_absent(asked.stdout + asked.stderr, "stiva ask")

        listed = run_stiva("history", "--json", home=stiva_home)
        run_id = json.loads(listed.stdout)[0]["id"]
        for extra in ([], ["--json"]):
            shown = run_stiva("history", "show", run_id, *extra, home=stiva_home)
            assert shown.returncode == 0, shown.stderr
            assert "[redacted]" in shown.stdout
            _assert_woven_key_absent(shown.stdout + shown.stderr, f"stiva history show {extra}")

        # The 401 path: the provider refuses the key, repeating it woven.
        fake.default("w1", Reply(status=401, error_message=f"Incorrect API key provided: {_woven(how)}."))
        refused = run_stiva("ask", "Q", "--config", config, "--baseline", "direct:w1", home=stiva_home)
        assert refused.returncode == 1
        assert "Incorrect API key provided: [redacted]." in refused.stderr
        _assert_woven_key_absent(refused.stdout + refused.stderr, "stiva ask's error")
    for file in (stiva_home / "data").rglob("*"):
        if file.is_file():
            data = file.read_bytes()
            assert _woven(how).encode() not in data and ECHOED.encode() not in data, file.name


@pytest.mark.parametrize("how", WEAVES)
async def test_the_api_sends_a_woven_key_neither_whole_nor_streamed_nor_in_an_error(how, monkeypatch, stiva_home):
    """`stiva serve` sends its clients the sanitized, masked text: the body, every stream chunk
    (the key split across the provider's pieces) and the 502 of a provider that refused it."""
    import openai

    monkeypatch.setenv("LAB_ECHO_KEY", ECHOED)
    with _served(_woven_answer(how)) as (fake, client):
        messages = [{"role": "user", "content": "Echo my key"}]
        whole = client.chat.completions.create(model="w1", messages=messages)
        chunks = list(client.chat.completions.create(model="w1", messages=messages, stream=True))
        fake.default("w1", Reply(status=401, error_message=f"Incorrect API key provided: {_woven(how)}."))
        with pytest.raises(openai.APIStatusError) as refused:
            client.chat.completions.create(model="w1", messages=messages)
    pieces = [c.choices[0].delta.content or "" for c in chunks if c.choices]
    assert whole.choices[0].message.content == WOVEN_ANSWER and "".join(pieces) == WOVEN_ANSWER
    _assert_woven_key_absent(whole.choices[0].message.content, "the API's reply")
    for piece in pieces:
        _assert_woven_key_absent(piece, "a streamed chunk")
    message = refused.value.body["message"]
    assert refused.value.status_code == 502 and "Incorrect API key provided: [redacted]." in message
    _assert_woven_key_absent(message, "the API's error body")


def test_history_show_masks_a_woven_key_a_run_stored_before_the_fix_holds(tmp_path, stiva_home, monkeypatch):
    """A run recorded before answers were made printable before masking may hold the key woven
    with escapes: `stiva history show` strips them, then masks the keys of the configured pool."""
    import sqlite3

    from tests.support.cli import run_stiva

    monkeypatch.setenv("LAB_ECHO_KEY", ECHOED)
    with FakeProvider() as fake:
        fake.default("w1", Reply("a stored answer", usage=(5, 5)))
        config = str(_echoing_config(tmp_path, fake.base_url))
        asked = run_stiva("ask", "Q", "--config", config, "--baseline", "direct:w1", home=stiva_home)
        assert asked.returncode == 0, asked.stderr
    old = f"Your key: {_woven('csi')}. Done."
    with sqlite3.connect(stiva_home / "data" / "stiva.db") as db:  # as the older Stiva stored it
        db.execute("UPDATE runs SET answer = ?", (old,))
        db.execute("UPDATE steps SET output = ?", (old,))
    run_id = json.loads(run_stiva("history", "--json", home=stiva_home).stdout)[0]["id"]
    shown = run_stiva("history", "--config", config, "show", run_id, home=stiva_home)
    assert shown.returncode == 0, shown.stderr
    assert "Your key: [redacted]. Done." in shown.stdout
    _assert_woven_key_absent(shown.stdout, "stiva history show")
    # Without the config that names the key, only the escapes go: what the fix at the source is for.
    shown = run_stiva("history", "show", run_id, home=stiva_home)
    assert shown.returncode == 0 and "Your key:" in shown.stdout and "\x1b" not in shown.stdout


@pytest.mark.parametrize("how", ["csi", "zero-width", "bidi"])
async def test_the_apps_panes_never_show_a_woven_key(how, fake, stiva_home, monkeypatch):
    """The chat's answer, the step pane and the copied answer: printable, then masked."""
    monkeypatch.setenv("STIVA_NO_SYSTEM_CLIPBOARD", "1")
    from stiva_tui.tui.app import StivaApp
    from tests.support.tui import ask, make_test_config, script_plan, wait_for

    fake.default("w1", _woven_answer(how))
    fake.default("w2", _woven_answer(how))
    script_plan(fake)
    providers = [{"name": "fake", "base_url": fake.base_url, "headers": {"X-Lab-Key": ECHOED}}]
    config = make_test_config(fake, providers=providers)
    runtime = await make_runtime(config)
    app = StivaApp(config, runtime=runtime, frozen=True)
    try:
        async with app.run_test(size=(150, 46)) as pilot:
            await ask(pilot, "Echo my key")
            screen = app.chat_screen
            await wait_for(pilot, lambda: screen.live.state.status == "finished" and not screen.running, what="the run")
            await pilot.pause(0.2)
            shown = "\n".join(
                "".join(s.text for s in strip) for strip in app.screen._compositor.render_update(full=True).strips
            )
            assert "[redacted]" in shown
            _assert_woven_key_absent(shown, "the app's screen")
            for node in (("step", 1, 0), ("step", 1, 1)):
                screen.tree.move_cursor(screen.tree.node_for(node))
                await wait_for(pilot, lambda node=node: screen.detail.key == node, what=f"{node} selected")
                _assert_woven_key_absent(screen.detail.text, f"the step pane of {node}")
            screen.action_copy_answer()
            _assert_woven_key_absent(app.clipboard, "the copied answer")
    finally:
        await runtime.aclose()
