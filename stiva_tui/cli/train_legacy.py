"""`stiva train`'s spellings from before its methods, mapped to them.

    stiva train SUITE ...                       is   stiva train grpo SUITE ...
    stiva train SUITE --method graded-dpo ...   is   stiva train graded SUITE ...
    stiva train --from-votes ...                is   stiva train dpo ...

`legacy_argv` rewrites the arguments before the method's parser reads them, so an old spelling
gives the very namespace its new one does. Where an old spelling's options do not go together
(a DPO option with GRPO, a suite with --from-votes, ...), it says why in one line, as the command
said it before the methods, with the new spelling: the method's parser alone would only say
"unrecognized arguments".
"""

from __future__ import annotations

import argparse
from typing import Any

from .common import UsageError
from .train_options import (
    METHODS,
    Family,
    _graded_options,
    _grpo_options,
    _model_options,
    _pair_options,
    _suite_options,
)

LEGACY_METHODS = {"grpo": "grpo", "graded-dpo": "graded"}
# Why a DPO option does not go with GRPO, as `stiva train SUITE` said it
_NOT_GRPO = {
    "--bench-pairs": "--bench-pairs says which pairs graded benches give to DPO",
    "--sft-weight": "--sft-weight weighs the chosen plans' likelihood in DPO",
    "--beta": "--beta is DPO's",
    "--bench": "--bench adds a graded bench's pairs to DPO",
}
_NOW = "now stiva train dpo or stiva train graded SUITE"


class LegacyUsage(UsageError):
    """An old spelling whose options do not go together; `known` holds the options it gave that
    every command takes (--config, --pool, ...)."""

    def __init__(self, message: str, known: dict[str, Any]):
        super().__init__(message)
        self.known = known


class _Raising(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise argparse.ArgumentError(None, message)


def _legacy_parser(common) -> tuple[argparse.ArgumentParser, dict[str, tuple[Family, str]]]:
    """Every method's options at once, none required, each left out of the namespace unless given;
    and each option's (family, flag) by its dest."""
    parser = _Raising(prog="stiva train", parents=[common], add_help=False)
    parser.add_argument("--from-votes", action="store_true")
    parser.add_argument("--method")
    owner: dict[str, tuple[Family, str]] = {}
    for family in (_suite_options, _model_options, _grpo_options, _pair_options, _graded_options):
        for action in family(parser, "legacy"):
            owner[action.dest] = (family, action.option_strings[0] if action.option_strings else "SUITE")
            action.default, action.required, action.type, action.choices = argparse.SUPPRESS, False, None, None
            if not action.option_strings:
                action.nargs = "?"
    return parser, owner


def legacy_argv(argv: list[str], common) -> list[str]:
    """`stiva train`'s arguments as its method's parser takes them: unchanged where they name a
    method, else the spelling before the methods mapped to one (`SUITE ...` to `grpo SUITE ...`,
    `SUITE --method graded-dpo` to `graded SUITE`, `--from-votes` to `dpo`). LegacyUsage where an
    option does not go with the method, with the reason as the old spelling said it."""
    if _names_router(argv):  # `SUITE --method router`: the router method's own parser reads the rest
        return _rewrite(argv, "router")
    parser, owner = _legacy_parser(common)
    try:
        given, _ = parser.parse_known_args(argv)
    except argparse.ArgumentError:  # malformed either way: the method's parser says how
        return argv if set(argv) & set(METHODS) else _rewrite(argv, "dpo" if "--from-votes" in argv else "grpo")
    values = vars(given)
    suite = values.pop("suite", None)
    from_votes, old_method = values.pop("from_votes", False), values.pop("method", None)
    options = [owner[dest] for dest in values if dest in owner]
    if not from_votes and old_method is None and (suite in METHODS or suite is None and not options):
        return argv  # a method named, or none and nothing else (`stiva train --help`): its parser answers
    problem = _legacy_problem(suite, from_votes, old_method, options)
    if problem:
        raise LegacyUsage(problem, {dest: value for dest, value in values.items() if dest not in owner})
    return _rewrite(argv, "dpo" if from_votes else LEGACY_METHODS[old_method or "grpo"])


def _legacy_problem(
    suite: str | None, from_votes: bool, old_method: str | None, options: list[tuple[Family, str]]
) -> str | None:
    """Why an old spelling's options do not go together (one line, with the new spelling), or None."""
    if old_method is not None and old_method not in LEGACY_METHODS:
        return f"--method takes grpo or graded-dpo, not {old_method!r}: stiva train grpo|graded SUITE ..."
    if from_votes and old_method == "graded-dpo":
        return (
            "--method graded-dpo grades the pool on a suite and trains on it (with the votes too): name the "
            "suite instead of --from-votes (stiva train graded SUITE ...)"
        )
    method = "dpo" if from_votes else LEGACY_METHODS[old_method or "grpo"]
    misfit = [(family, flag) for family, flag in options if family not in METHODS[method].families]
    if any(family is _graded_options for family, _ in misfit):
        return "--graded-seeds and --graded-systems go with --method graded-dpo (stiva train graded SUITE ...)"
    pairs = [flag for family, flag in misfit if family is _pair_options]
    if pairs:
        first = min(pairs, key=list(_NOT_GRPO).index)
        return f"{_NOT_GRPO[first]}: it goes with --from-votes or --method graded-dpo ({_NOW})"
    if method == "dpo" and suite is not None:
        return (
            "--from-votes trains on pairs: add a graded suite as a bench of it (stiva bench SUITE --systems ...), "
            "then --bench ID; or train on the suite in a run of its own (stiva train grpo SUITE ...)"
        )
    if misfit:
        flags = [flag for _, flag in misfit]
        one = len(flags) == 1
        return (
            f"{', '.join(flags)} {'is' if one else 'are'} for training on a suite by GRPO (its sampled plans), "
            f"not by DPO on pairs: leave {'it' if one else 'them'} out with "
            f"{'--from-votes' if from_votes else '--method graded-dpo'}"
        )
    if method != "dpo" and suite is None:
        return (
            "name a suite to train on (stiva train grpo SUITE ...), or train on the compare-mode votes "
            "(stiva train dpo ..., was --from-votes)"
        )
    return None


def _names_router(argv: list[str]) -> bool:
    if argv and argv[0] in METHODS:
        return False
    for index, token in enumerate(argv):
        if token == "--method=router" or (token == "--method" and argv[index + 1 : index + 2] == ["router"]):
            return True
    return False


def _rewrite(argv: list[str], method: str) -> list[str]:
    """`argv` under `method`, without the options that chose it (--from-votes, --method X)."""
    out: list[str] = [method]
    tokens = iter(argv)
    for token in tokens:
        name, equals, _ = token.partition("=")
        if len(name) > 2 and "--from-votes".startswith(name):
            continue
        if len(name) > 2 and "--method".startswith(name):
            if not equals:
                next(tokens, None)  # its value
            continue
        out.append(token)
    return out
