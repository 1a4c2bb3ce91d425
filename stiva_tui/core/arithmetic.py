"""Exact arithmetic found in a question, for a worker that cannot add.

The embedded 270M base model answers "What is 4 + 5?" with "4 + 5 = 14": it copies the shape of
its worked examples, not the sum. So the base worker's prompt carries a calculator's note beside
such a question ("Note: calculator: 4 + 5 = 9"), and the model copies that instead, the way a
tool-using model reads a tool's result.

`calculation(text)` finds the first arithmetic expression written in the text, in symbols or in
words ("17*23", "10 divided by 2", "9 minus 4", "(3 + 4) x 2"), and evaluates it exactly and
safely: numbers, + - * / and powers with small exponents only, parsed with `ast` and never
`eval`ed; anything else, or a result out of bounds, gives None.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

# Words (and signs) for the operators, turned into Python's before parsing.
_WORDS = [
    (r"\bmultiplied\s+by\b", "*"),
    (r"\bdivided\s+by\b", "/"),
    (r"\bto\s+the\s+power\s+of\b", "**"),
    (r"\bplus\b", "+"),
    (r"\bminus\b", "-"),
    (r"\btimes\b", "*"),
    (r"(?<=[\d)])\s*[x×]\s*(?=[\d(])", " * "),
    (r"÷", "/"),
    (r"−", "-"),
    (r"\^", "**"),
]
_NUMBER = r"\d+(?:\.\d+)?"
# A number, then one or more (operator number) pairs, parentheses allowed around the numbers. A
# "-" counts only with space on both sides or in words ("9 minus 4"), so "10-20" (a range) and
# "2026-12-01" (a date) are not sums.
_OPERATOR = r"(?:\s*(?:\*\*|[+*/])\s*|\s+-\s+)"
_OPERAND = rf"\(*\s*-?{_NUMBER}(?:\s*\))*"
_EXPRESSION = re.compile(rf"{_OPERAND}(?:{_OPERATOR}{_OPERAND})+")

# A power may be complex ((-8) ** 0.5): _value refuses it.
_BINARY: dict[type[ast.operator], Callable[[float, float], float | complex]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}
_LIMIT = 1e15  # results and operands beyond this are not a question's arithmetic
_MAX_EXPONENT = 12


@dataclass(frozen=True)
class Calculation:
    expression: str  # as evaluated, in symbols: "10 / 2"
    value: float | int

    @property
    def result(self) -> str:
        return format_number(self.value)

    @property
    def note(self) -> str:
        return f"calculator: {self.expression} = {self.result}"


def format_number(value: float | int) -> str:
    """An integer without ".0"; else up to 10 significant digits, no trailing zeros."""
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return f"{value:.10g}"


def calculation(text: str) -> Calculation | None:
    """The first arithmetic expression in `text`, evaluated; None when there is none or it does
    not evaluate (division by zero, a huge power, a result out of bounds)."""
    normal = text
    for pattern, symbol in _WORDS:
        normal = re.sub(pattern, symbol, normal, flags=re.IGNORECASE)
    for match in _EXPRESSION.finditer(normal):
        expression = _balanced(match.group(0).strip())
        if expression is None:
            continue
        value = _evaluate(expression)
        if value is not None:
            return Calculation(_spaced(expression), value)
    return None


def _balanced(expression: str) -> str | None:
    """The expression with unmatched parentheses at its ends dropped, or None if still unbalanced."""
    while expression.startswith("(") and expression.count("(") > expression.count(")"):
        expression = expression[1:].lstrip()
    while expression.endswith(")") and expression.count(")") > expression.count("("):
        expression = expression[:-1].rstrip()
    depth = 0
    for char in expression:
        depth += (char == "(") - (char == ")")
        if depth < 0:
            return None
    return expression if depth == 0 else None


def _spaced(expression: str) -> str:
    """The expression as a person writes it: "(3 + 4) * 2", "-3 + 5"."""
    compact = re.sub(r"\s+", "", expression)
    return re.sub(r"(\*\*|[+*/]|(?<=[\d)])-)", r" \1 ", compact)


def _evaluate(expression: str) -> float | int | None:
    try:
        tree = ast.parse(expression, mode="eval")
        value = _value(tree.body)
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, TypeError):
        return None
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value


def _value(node: ast.AST) -> float | int:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        if abs(node.value) > _LIMIT:
            raise ValueError("operand out of bounds")
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _value(node.operand)
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise ValueError("exponent out of bounds")
        value = _BINARY[type(node.op)](left, right)
        if isinstance(value, complex) or abs(value) > _LIMIT:
            raise ValueError("result out of bounds")
        return value
    raise ValueError(f"not arithmetic: {type(node).__name__}")
