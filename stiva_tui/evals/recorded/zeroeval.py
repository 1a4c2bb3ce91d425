"""ZeroEval's `result_dirs` (github.com/yuchenlin/ZeroEval, Apache-2.0) read as `records` dicts.

The folder holds one subfolder per dataset (`gsm/`, `math-l5/`, `crux/`), each with one `<model>.json`
per model: a JSON list of items with `session_id`, `question` (`problem` for math-l5), `chat_history`
(the prompt as sent), `output` (a one-element list: the model's answer text) and `answer` (the
reference). The files carry no token counts, costs or latencies, so none are returned.

`correct` is ZeroEval's own verdict, computed by a port of its scorers at commit
570c6269a2e4930ee06a17e713fece1ba52cf1dd (no code of the repo is imported or run):
- `src/evaluation/eval_utils.py`: `extract_first_complete_json`, `extract_values_from_json`,
  `model_specific_extraction`;
- `src/evaluation/math_eval.py` (gsm and math-l5): `sanitize_math_answers` and the comparison of the
  first number in the model's and the reference's answer;
- `src/evaluation/crux_eval.py` (crux): the string comparison of the quote-stripped answers.
The one deliberate difference: ZeroEval runs Python's `eval` on any answer with a "/" in it (to turn
fractions into floats); this port evaluates only numbers, operators and a few numeric builtins
(`_arithmetic`), never a model's text as code.

Checked on every result file of that commit (130 files): the port gives the repository's scorer's
verdict on every answer, and the published `gsm.summary.json` and `math-l5.summary.json` accuracies
to the last digit. The published `crux.summary.json` predates two fixes to `crux_eval.py` (commits
f37c3f9 and e200bab: two empty answers are equal, and a model's newlines are compared as "\\n"), so
its crux accuracies are 0.75 to 2.5 points below the current scorer's, which this port follows.

Stdlib only; nothing above `evals` is imported.
"""

from __future__ import annotations

import ast
import json
import operator
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import RecordsError

__all__ = ["DATASETS", "extract_answer", "read_zeroeval", "zeroeval_correct"]

DATASETS = ("gsm", "math-l5", "crux")
_MATH_DATASETS = ("gsm", "math-l5")


# --- eval_utils.py ---------------------------------------------------------------------------------


def _first_complete_json(text: str) -> dict | None:
    """`extract_first_complete_json`: the first brace-balanced `{...}` (braces counted blindly, inside
    strings too), parsed with its newlines removed; None when there is none or it does not parse
    (no later object is tried)."""
    depth, start = 0, None
    for i, char in enumerate(text):
        if char == "{":
            depth += 1
            if start is None:
                start = i
        elif char == "}" and depth:
            depth -= 1
            if not depth:
                try:
                    value = json.loads(text[start : i + 1].replace("\n", ""))
                except (ValueError, RecursionError):  # JSONDecodeError, and int-digits limits
                    return None
                return value if isinstance(value, dict) else None
    return None


_QUOTED = re.compile(r'"answer"\s*:\s*"([^"]*?)"')
_QUOTED_BROKEN = re.compile(r'"answer"\s*:\s*"(.*?)"', re.DOTALL)
_UNQUOTED_VALUE = re.compile(r'"answer"\s*:\s*([^,\s]*)')
_UNQUOTED_KEY = re.compile(r"answer\s*:\s*([^,\s]*)")


def _answer_from_json_text(text: str) -> str | None:
    """`extract_values_from_json(text, allow_no_quotes=True)["answer"]` (None where the key is absent):
    a quoted value, else an unquoted one (which may be empty), else `answer:` with no quotes at all."""
    for pattern in (_QUOTED, _QUOTED_BROKEN, _UNQUOTED_VALUE, _UNQUOTED_KEY):
        match = pattern.search(text)
        if match:
            return match.group(1)
    return None


_BOXED = re.compile(r"\\boxed{([\w\d]+)}")


def _model_specific(model: str, text: str) -> str | None:
    """`model_specific_extraction`: Llama-3.1 models' `\\boxed{...}` when "boxed" is in the last 30
    characters (the first box in the text, word characters only)."""
    if "Llama-3.1" in model and "boxed" in text[-30:]:
        match = _BOXED.search(text)
        if match:
            return match.group(1)
    return None


def extract_answer(model: str, output: str) -> Any | None:
    """The answer ZeroEval reads from a model's `output`, or None for its "No answer": the first JSON
    object's `answer`, else the regex fallbacks, else the model-specific one. The value is what the
    JSON held (a number, a string, a list...) or a string from the fallbacks; never empty-checked
    except the model-specific step, as in the repo."""
    found = _first_complete_json(output)
    if found is not None and "answer" in found:
        return found["answer"]
    answer = _answer_from_json_text(output)
    if answer is not None:
        return answer
    extracted = _model_specific(model, output)
    return extracted if extracted else None


# --- math_eval.py (gsm, math-l5) -----------------------------------------------------------------


_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.BitXor: operator.xor,  # "3^2" is 1 to eval(), and "(5/4)^48" a TypeError
    ast.BitOr: operator.or_,
    ast.BitAnd: operator.and_,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg, ast.Invert: operator.invert, ast.Not: operator.not_}
_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_BUILTINS = {"abs": abs, "round": round, "min": min, "max": max, "pow": pow, "int": int, "float": float}


class _NotArithmetic(Exception):
    pass


def _arithmetic(node: ast.AST) -> Any:
    """Python's `eval` restricted to numbers: number literals, arithmetic, bitwise and comparison
    operators, `and`/`or`, and the numeric builtins abs, round, min, max, pow, int and float. Anything
    else (a name, a string, another call) raises, as it does in `eval` followed by `float()`, so the
    answer stays as written in both."""
    if isinstance(node, ast.Expression):
        return _arithmetic(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float, complex, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_arithmetic(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _arithmetic(node.left), _arithmetic(node.right)
        huge = isinstance(right, int) and right > 4096
        if huge and (isinstance(node.op, ast.LShift) or (isinstance(node.op, ast.Pow) and abs(left) > 1)):
            raise OverflowError("too large")  # float() of it overflows in ZeroEval too
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.BoolOp):
        value = _arithmetic(node.values[0])
        for operand in node.values[1:]:
            if bool(value) == isinstance(node.op, ast.Or):
                break
            value = _arithmetic(operand)
        return value
    if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        left = _arithmetic(node.left)
        for op, comparator in zip(node.ops, node.comparators):
            right = _arithmetic(comparator)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _BUILTINS
        and not node.keywords
        and not any(isinstance(arg, ast.Starred) for arg in node.args)
    ):
        args = [_arithmetic(arg) for arg in node.args]
        if node.func.id == "pow" and len(args) == 2 and isinstance(args[1], int) and args[1] > 4096:
            raise OverflowError("too large")
        return _BUILTINS[node.func.id](*args)
    raise _NotArithmetic(type(node).__name__)


def _sanitize_math(answer: str) -> str:
    """`sanitize_math_answers`: no "$", stripped, no ",", and an expression with "/" replaced by its
    float value when it evaluates to a number."""
    answer = answer.replace("$", "").strip().replace(",", "")
    if "/" in answer:
        try:
            # eval() ignores leading spaces and tabs; ast.parse would call them an indent
            value = float(_arithmetic(ast.parse(answer.lstrip(" \t"), mode="eval")))
            answer = str(value)
        except Exception:  # as ZeroEval's bare `except: pass`
            pass
    return answer


_FIRST_NUMBER = re.compile(r"-?\d+(\.\d+)?")


def _math_correct(model_answer: Any, reference: str) -> bool:
    """math_eval.py: the first number of each sanitized answer, compared as floats."""
    mine = _FIRST_NUMBER.search(_sanitize_math(str(model_answer)))
    truth = _FIRST_NUMBER.search(_sanitize_math(reference.replace("#", "").strip()))
    if not (mine and truth):
        return False
    return float(mine.group()) == float(truth.group())


# --- crux_eval.py ------------------------------------------------------------------------------------


def _crux_correct(model_answer: Any, reference: Any) -> bool:
    """crux_eval.py: the answers as strings, quotes stripped at both ends, the model's newlines
    written as "\\n", compared exactly (two empty answers count as equal)."""
    mine = str(model_answer).strip("'\"").replace("\n", "\\n")
    truth = str(reference).strip("'\"")
    return mine == truth


def zeroeval_correct(dataset: str, model: str, output: str, reference: Any) -> bool:
    """ZeroEval's verdict on one answer: `dataset` is "gsm", "math-l5" or "crux", `model` the file's stem
    (the Llama-3.1 fallback depends on it). An answer it cannot extract is wrong."""
    answer = extract_answer(model, output)
    if answer is None:
        return False
    if dataset in _MATH_DATASETS:
        return _math_correct(answer, str(reference))
    if dataset == "crux":
        return _crux_correct(answer, reference)
    raise ValueError(f"ZeroEval dataset {dataset!r} has no scorer here (known: {', '.join(DATASETS)})")


# --- reading result_dirs -------------------------------------------------------------------------------


def _dataset_folders(root: Path) -> list[tuple[str, Path]]:
    found = [(name, root / name) for name in DATASETS if (root / name).is_dir()]
    if not found and root.name in DATASETS:
        found = [(root.name, root)]  # a dataset's folder itself
    return found


def _record(dataset: str, model: str, index: int, item: Any, path: Path) -> dict:
    where = {"source": str(path), "line": index + 1}
    if not isinstance(item, dict):
        raise RecordsError(f"record {index + 1} is a {type(item).__name__}, not an object", **where)
    question = item.get("question", item.get("problem"))
    if not isinstance(question, str) or not question.strip():
        raise RecordsError(f"record {index + 1} has no `question` (or `problem`) text", **where)
    output = item.get("output")
    if isinstance(output, list) and output:
        output = output[0]
    if not isinstance(output, str):
        raise RecordsError(f"record {index + 1} has no `output` text (a list holding the answer)", **where)
    if "answer" not in item or item["answer"] is None:
        raise RecordsError(f"record {index + 1} has no reference `answer`", **where)
    reference = item["answer"]
    if dataset in _MATH_DATASETS and not isinstance(reference, str):
        raise RecordsError(f"record {index + 1}'s `answer` is not text", **where)
    key = item.get("session_id")
    if key is None:
        key = index
    if not isinstance(key, (str, int)) or isinstance(key, bool):
        raise RecordsError(f"record {index + 1}'s `session_id` is not a string or a number", **where)
    return {
        "id": f"{dataset}/{key}",
        "question": question,
        "model": model,
        "response": output,
        "correct": zeroeval_correct(dataset, model, output, reference),
        # the reference as the scorer reads it: gsm's "# 18" is "18"
        "answer": reference.replace("#", "").strip() if dataset in _MATH_DATASETS else str(reference),
        "domain": dataset,
    }


def _read_text(path: Path, limit: int) -> str:
    """The file's text, refused when it holds more than `limit` bytes (by its size, and by what
    one read returns, for a file that grows meanwhile)."""
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise RecordsError(f"more than the {limit:,} bytes read of one import", source=str(path))
    return data.decode("utf-8")


def _read_file(dataset: str, path: Path, limit: int) -> list[dict]:
    model = path.stem
    try:
        data = json.loads(_read_text(path, limit))
    except RecursionError:
        raise RecordsError("not valid JSON (nested too deeply)", source=str(path)) from None
    except json.JSONDecodeError as error:
        message = f"not valid JSON ({error.msg}, column {error.colno})"
        raise RecordsError(message, source=str(path), line=error.lineno) from None
    except (OSError, UnicodeDecodeError) as error:
        raise RecordsError(f"cannot be read ({error})", source=str(path)) from None
    if not isinstance(data, list):
        raise RecordsError("is not a ZeroEval result file (a JSON list of items)", source=str(path))
    records = [_record(dataset, model, index, item, path) for index, item in enumerate(data)]
    seen: dict[str, int] = {}
    for index, record in enumerate(records):
        if record["id"] in seen:
            raise RecordsError(
                f"record {index + 1} repeats item {record['id']!r} (record {seen[record['id']] + 1})",
                source=str(path),
                line=index + 1,
            )
        seen[record["id"]] = index
    return records


def read_zeroeval(folder: str | Path, models: Sequence[str] | None = None, limit: int = 2**30) -> list[dict]:
    """Every answer in a ZeroEval `result_dirs` folder (or one dataset's folder in it) as `records` dicts,
    in dataset, model, file order: `id` "<dataset>/<session_id>", `question` as the dataset states it,
    `model` the file's stem, `response` the output text, `correct` ZeroEval's verdict, `answer` the
    reference (gsm's and math-l5's without "#", as the scorer reads them), `domain` the dataset.
    `models` keeps only those file stems (each must exist in some dataset); `limit` bytes of files
    are read in all, each refused by its size before it is read (records.MAX_FILE_BYTES).
    Raises `RecordsError` naming the file and the record (1-based) at fault."""
    root = Path(folder)
    if not root.is_dir():
        raise RecordsError("is not a folder of ZeroEval results (result_dirs)", source=str(root))
    datasets = _dataset_folders(root)
    if not datasets:
        raise RecordsError(f"holds none of ZeroEval's {', '.join(d + '/' for d in DATASETS)} folders", source=str(root))
    wanted = None if models is None else list(dict.fromkeys(models))
    records: list[dict] = []
    found: set[str] = set()
    budget = limit  # of all the files together
    for dataset, path in datasets:
        for file in sorted(path.glob("*.json")):
            if not file.is_file() or (wanted is not None and file.stem not in wanted):
                continue
            found.add(file.stem)
            size = file.stat().st_size
            if size > budget:
                raise RecordsError(
                    f"the result files take more than the {limit:,} bytes read of one import",
                    source=str(file),
                )
            budget -= size
            records.extend(_read_file(dataset, file, budget + size))
    if wanted is not None:
        missing = [name for name in wanted if name not in found]
        if missing:
            raise RecordsError(f"has no result file for model(s) {', '.join(missing)}", source=str(root))
    elif not found:
        raise RecordsError("holds no <model>.json result file", source=str(root))
    return records
