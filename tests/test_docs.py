"""The docs cannot drift from the command line.

Every line of a ```bash block in README.md and docs/**/*.md that starts with `stiva ` must parse
with the real `stiva` parser, built in-process: a renamed or removed flag, a subcommand that no
longer exists, or a value a choice no longer takes fails here with the line that shows it.

What a line may carry beside the command: a `# comment`, a pipe or redirection after it
(`| jq`, `> report.json`), a `\\` continuation, optional parts in brackets (`[--json]`), and
placeholders in capitals (FILE, ID, N, DIR), which stand for a value of any type.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

_FENCE = re.compile(r"^\s*```")
_PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*$")  # FILE, ID, N, DIR, SUITE, BENCH_ID
_OPERATORS = set("|&;<>()")


def _parser():
    """The real parser of `stiva`, as its entry point builds it."""
    from stiva_tui import cli

    return cli.build_parser()


def bash_commands(text: str) -> list[tuple[int, str]]:
    """(line number, command) of every `stiva ...` line in the ```bash blocks of `text`;
    continuation lines are joined onto the line they continue."""
    found: list[tuple[int, str]] = []
    lines = text.splitlines()
    in_bash = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if _FENCE.match(line):
            in_bash = not in_bash and line.strip()[3:].strip().lower() in ("bash", "sh", "shell", "console")
            i += 1
            continue
        start = i
        command = line.strip()
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command[:-1] + " " + lines[i].strip()
        if in_bash and command.startswith("stiva "):
            found.append((start + 1, command))
        i += 1
    return found


def words(command: str) -> list[str]:
    """The arguments after `stiva`: comments dropped, cut at the first pipe or redirection,
    brackets of optional parts removed, placeholders given a value of any type."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    argv: list[str] = []
    for token in lexer:
        if token and set(token) <= _OPERATORS:
            break
        argv.append(token)
    out = []
    for token in argv[1:]:
        token = token.removeprefix("[").removesuffix("]")
        if not token:
            continue
        out.append("1" if _PLACEHOLDER.match(token) else token)
    return out


def parse_error(command: str) -> str | None:
    """None when `command` parses with the real parser; else what argparse said."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            _parser().parse_args(words(command))
    except SystemExit as exc:
        if exc.code not in (0, None):  # --help and --version exit 0
            return err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else f"exit {exc.code}"
    return None


def _all_commands() -> list[tuple[str, int, str]]:
    return [
        (path.relative_to(ROOT).as_posix(), number, command)
        for path in DOCS
        for number, command in bash_commands(path.read_text(encoding="utf-8"))
    ]


def test_every_stiva_command_in_the_docs_parses():
    commands = _all_commands()
    bad = [
        f"{where}:{number}: {command}\n    {error}"
        for where, number, command in commands
        if (error := parse_error(command))
    ]
    assert not bad, "commands in the docs that `stiva` no longer accepts:\n" + "\n".join(bad)


def test_the_docs_show_commands_to_check():
    """Not vacuous: the README and the docs each show stiva commands in bash blocks."""
    commands = _all_commands()
    readme = [c for c in commands if c[0] == "README.md"]
    in_docs = [c for c in commands if c[0].startswith("docs/")]
    assert len(readme) >= 8, readme
    assert len(in_docs) >= 20, in_docs


def test_a_made_up_flag_fails():
    assert parse_error("stiva ask 'What is 17*23?' --json") is None
    error = parse_error("stiva ask 'What is 17*23?' --no-such-flag")
    assert error is not None and "--no-such-flag" in error
    assert parse_error("stiva bench basic --systems conductor --concurrency many") is not None
    assert parse_error("stiva no-such-command") is not None


def test_what_a_line_may_carry_beside_the_command():
    text = "\n".join(
        [
            "```bash",
            "stiva bench basic --systems conductor,moa --json > report.json   # a comment",
            "stiva history [--json] [--limit N] | head",
            "stiva train skills --pool sim --base embedded \\",
            "    --out ~/adapters/sim --steps 80",
            "```",
            "stiva outside --any-block",
            "```toml",
            "stiva = 'not bash'",
            "```",
        ]
    )
    found = bash_commands(text)
    assert [number for number, _ in found] == [2, 3, 4]
    assert words(found[0][1]) == ["bench", "basic", "--systems", "conductor,moa", "--json"]
    assert words(found[1][1]) == ["history", "--json", "--limit", "1"]
    assert words(found[2][1])[-2:] == ["--steps", "80"]
    assert all(parse_error(command) is None for _, command in found)


@pytest.mark.parametrize("path", ["docs/measurements.md", "docs/architecture.md", "docs/security.md"])
def test_the_docs_the_code_points_to_exist(path):
    assert (ROOT / path).is_file()


# --- links ---------------------------------------------------------------------------------------

_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """`text` without its fenced code blocks."""
    kept, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            kept.append(line)
    return "\n".join(kept)


def anchors(text: str) -> set[str]:
    """The anchors GitHub makes of a Markdown file's headings."""
    found: set[str] = set()
    for line in _prose(text).splitlines():
        if not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        slug = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
        candidate, n = slug, 0
        while candidate in found:
            n += 1
            candidate = f"{slug}-{n}"
        found.add(candidate)
    return found


def broken_links(path: Path) -> list[str]:
    bad = []
    for target in _LINK.findall(_prose(path.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.is_file() and anchor not in anchors(dest.read_text(encoding="utf-8")):
            bad.append(f"{target}: no such heading")
    return bad


def test_every_link_in_the_docs_leads_somewhere():
    bad = [f"{path.relative_to(ROOT)}: {problem}" for path in DOCS for problem in broken_links(path)]
    assert not bad, "\n".join(bad)


def test_a_broken_link_is_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# A title: `--pool sim`\n\n[ok](#a-title---pool-sim) [gone](missing.md) "
        "[wrong](#no-such-title) [web](https://example.org)\n"
    )
    assert broken_links(page) == ["missing.md: no such file", "#no-such-title: no such heading"]
