"""The config file: defaults, and a clear ConfigError for every kind of bad file."""

from __future__ import annotations

import pytest

from stiva_tui.config import Config, ConfigError, load_config, parse_config


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("STIVA_HOME", str(tmp_path / "stiva"))
    return tmp_path


def _write(tmp_path, text: str):
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_missing_default_file_gives_defaults(home):
    config = load_config()
    assert config == Config()
    assert config.catalog is True
    assert config.discovery.timeout_s == 0.3


def test_missing_explicit_file(home):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(home / "nope.toml")


def test_valid_file(home):
    path = _write(
        home,
        """
[conductor]
backend = "remote"
model = "lab-qwen"

[[providers]]
name = "mylab"
base_url = "http://127.0.0.1:8000/v1/"
api_key_env = "MYLAB_KEY"

[[models]]
id = "lab-qwen"
provider = "mylab"
model = "Qwen/Qwen3-32B"
price_in = 0.10
price_out = 0.30
description = "strong at math and code, slow"

[[models]]
id = "my-gpt"
provider = "openai"
model = "gpt-5"
""",
    )
    config = load_config(path)
    assert config.conductor.backend == "remote"
    assert config.providers[0].base_url == "http://127.0.0.1:8000/v1"
    assert [m.id for m in config.models] == ["lab-qwen", "my-gpt"]
    assert config.models[0].price_out == 0.30


def test_bad_toml(home):
    path = _write(home, "[conductor\nbackend = 'auto'\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "not valid TOML" in str(info.value)
    assert str(path) in str(info.value)


def test_unknown_key(home):
    path = _write(home, "colour = 'red'\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "colour" in str(info.value)


def test_unknown_nested_key(home):
    path = _write(home, "[conductor]\nbackend = 'auto'\nmax_stepz = 3\n")
    with pytest.raises(ConfigError, match="conductor.max_stepz"):
        load_config(path)


def test_unknown_provider(home):
    path = _write(
        home,
        """
[[models]]
id = "x"
provider = "nowhere"
model = "m"
""",
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "'nowhere'" in message and "models.x" in message
    assert "openai" in message  # the known providers are listed


def test_duplicate_model_id(home):
    path = _write(
        home,
        """
[[models]]
id = "same"
provider = "openai"
model = "gpt-5"

[[models]]
id = "same"
provider = "anthropic"
model = "claude"
""",
    )
    with pytest.raises(ConfigError, match="'same' appears twice"):
        load_config(path)


def test_duplicate_provider_name():
    with pytest.raises(ConfigError, match="share a name"):
        parse_config({"providers": [{"name": "a", "base_url": "http://x"}, {"name": "a", "base_url": "http://y"}]})


@pytest.mark.parametrize("url", ["ftp://host/v1", "127.0.0.1:8000/v1", "localhost"])
def test_bad_url(home, url):
    path = _write(home, f'[[providers]]\nname = "p"\nbase_url = "{url}"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "providers.0.base_url" in str(info.value)
    assert "http://" in str(info.value)


def test_bad_values():
    with pytest.raises(ConfigError, match="max_steps"):
        parse_config({"conductor": {"max_steps": 0}})
    with pytest.raises(ConfigError, match="price_in"):
        parse_config({"models": [{"id": "a", "provider": "openai", "model": "m", "price_in": -1}]})
    with pytest.raises(ConfigError, match="discovery.timeout_s"):
        parse_config({"discovery": {"timeout_s": 0}})


# --- bad files: one clear line naming the file and the field -----------------------------------


def test_a_file_that_is_not_utf8(home):
    path = home / "config.toml"
    path.write_bytes(b'theme = "caf\xe9"\n')
    with pytest.raises(ConfigError, match=r"config\.toml: not UTF-8 text \(byte 12\)"):
        load_config(path)


def test_deeply_nested_toml_is_one_error_not_a_recursion_traceback(home):
    path = _write(home, "keymap = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_config(path)


# --- dotted keys and nesting are bounded before tomllib sees the file (issue 56, item 5) ----------

HOSTILE_SHAPES = {  # the text, and the line the error must name
    # one key of 20,000 parts (40 KB): tomllib took 5 s and 1.6 GB on it, growing with the square
    "a dotted key": ("# a config\n[conductor]\nbackend = 'auto'\n" + ".".join(["a"] * 20_000) + " = 1\n", 4),
    "a quoted, spaced dotted key": ("x = 1\n\n" + " . ".join(['"a"'] * 20_000) + " = 1\n", 3),
    "a table header": ("x = 1\n\n[" + ".".join(["t"] * 20_000) + "]\n", 3),
    "nested inline tables": ("x = 1\nkeymap = " + "{a = " * 5_000 + "1" + "}" * 5_000 + "\n", 2),
    "nested arrays": ('x = """\n[[[[\n"""\nkeymap = [\n' + "[" * 5_000 + "]" * 5_000 + "]\n", 5),
}


@pytest.mark.parametrize("shape", HOSTILE_SHAPES)
def test_a_long_dotted_key_or_deep_nesting_is_refused_at_once_with_its_line(home, shape):
    import time

    text, line = HOSTILE_SHAPES[shape]
    path = _write(home, text)
    started = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert time.perf_counter() - started < 0.5
    message = str(info.value)
    assert message.startswith(f"{path}: ") and message.endswith(f"(at line {line})") and "\n" not in message
    assert "a dotted key of more than 32 parts" in message or "nested too deeply" in message


def test_dots_and_brackets_in_strings_and_comments_do_not_count(home):
    dots = ".".join(["a"] * 100)
    path = _write(
        home,
        f"""# {dots} [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[
[conductor]
backend = "auto"  # {dots}
model = "{dots}"
[keymap]
send = '''{dots}
{"[" * 40}'''
"a.b.c.d" = "{"{" * 40}"
""",
    )
    config = load_config(path)
    assert config.conductor.model == dots and config.keymap["a.b.c.d"] == "{" * 40


def test_a_key_of_32_parts_and_32_levels_still_load():
    from stiva_tui.core.toml_bounds import MAX_DEPTH, MAX_KEY_PARTS, loads

    data = loads(f"{'.'.join(['k'] * MAX_KEY_PARTS)} = 1.5\nx = {'[' * MAX_DEPTH}{']' * MAX_DEPTH}\n")
    node, parts = data, 0
    while isinstance(node, dict):
        node, parts = node["k"], parts + 1
    levels, array = 1, data["x"]
    while array:
        array, levels = array[0], levels + 1
    assert (node, parts, levels) == (1.5, MAX_KEY_PARTS, MAX_DEPTH)


@pytest.mark.parametrize(
    "text, field",
    [
        (
            '[[providers]]\nname = "p"\nbase_url = "http://127.0.0.1:1/v1"\n'
            '[[models]]\nid = "m"\nprovider = "p"\nmodel = "m"\nprice_out = inf\n',
            "models.0.price_out",
        ),
        (
            '[[providers]]\nname = "p"\nbase_url = "http://127.0.0.1:1/v1"\n'
            '[[models]]\nid = "m"\nprovider = "p"\nmodel = "m"\nprice_in = nan\n',
            "models.0.price_in",
        ),
        (
            '[[providers]]\nname = "p"\nbase_url = "http://127.0.0.1:1/v1"\n'
            '[[models]]\nid = "m"\nprovider = "p"\nmodel = "m"\nenabled = "yes"\n',
            "models.0.enabled",
        ),
        ("[conductor]\nmax_steps = 3.0\n", "conductor.max_steps"),
        ('catalog = "false"\n', "catalog"),
        ('[serve]\nport = "8787"\n', "serve.port"),
    ],
)
def test_numbers_and_booleans_are_strict(home, text, field):
    with pytest.raises(ConfigError) as info:
        load_config(_write(home, text))
    message = str(info.value)
    assert message.startswith(str(home / "config.toml")) and f"{field}:" in message
    assert "\n" not in message


def test_whole_numbers_still_count_as_prices(home):
    config = load_config(
        _write(
            home,
            '[[providers]]\nname = "p"\nbase_url = "http://127.0.0.1:1/v1"\n'
            '[[models]]\nid = "m"\nprovider = "p"\nmodel = "m"\nprice_out = 2\n',
        )
    )
    assert config.models[0].price_out == 2.0


def test_enter_sends_is_off_by_default_and_the_templates_line_turns_it_on(home):
    from stiva_tui.config_template import TEMPLATE

    assert Config().enter_sends is False
    wanted = ("# theme = ", "# enter_sends = ", "# [keymap]", "# send = ")
    text = "\n".join(line[2:] if line.startswith(wanted) else line for line in TEMPLATE.splitlines())
    config = load_config(_write(home, text.replace("enter_sends = false", "enter_sends = true")))
    assert config.enter_sends is True and config.theme == "stiva-dark" and config.keymap == {"send": "ctrl+s"}
    with pytest.raises(ConfigError, match="enter_send"):
        load_config(_write(home, "enter_send = true\n"))


def test_the_answer_cap_defaults_to_1_mib_and_the_templates_line_sets_it(home):
    from stiva_tui.config_template import TEMPLATE

    assert Config().workers.max_answer_kb == 1024
    wanted = ("# [workers]", "# max_answer_kb = ")
    text = "\n".join(line[2:] if line.startswith(wanted) else line for line in TEMPLATE.splitlines())
    assert "\nmax_answer_kb = 1024 " in text
    config = load_config(_write(home, text.replace("max_answer_kb = 1024", "max_answer_kb = 64")))
    assert config.workers.max_answer_kb == 64


@pytest.mark.parametrize("value", ['"1024"', "1024.0", "true", "0", "-1", "16385"])
def test_the_answer_cap_is_strict(home, value):
    with pytest.raises(ConfigError) as info:
        load_config(_write(home, f"[workers]\nmax_answer_kb = {value}\n"))
    message = str(info.value)
    assert message.startswith(str(home / "config.toml")) and "workers.max_answer_kb:" in message
    assert "\n" not in message
