"""Conditions over a job's metadata (``MetaDataChecker``), evaluated without ``eval``.

The expression is parsed with :mod:`ast` and only comparisons, ``and``/``or``/``not``,
unary minus, names (the metadata keys) and constants are accepted; anything else (calls,
attributes, subscripts, arithmetic) is refused when the expression is set.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from typing import Any, Final

import traitlets

from ganga_like.errors import PostProcessError

__all__ = ["MetadataExpression", "check_expression", "evaluate"]

_COMPARE: Final[Mapping[type[ast.cmpop], Callable[[Any, Any], Any]]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}


def check_expression(text: str) -> ast.expr:
    """The parsed expression; ValueError saying what is not allowed."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not an expression: {exc.msg}") from None
    for node in ast.walk(tree):
        allowed = isinstance(
            node,
            ast.Expression
            | ast.Compare
            | ast.BoolOp
            | ast.And
            | ast.Or
            | ast.Name
            | ast.Load
            | ast.Constant
            | ast.Tuple
            | ast.List,
        ) or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub))
        allowed = allowed or isinstance(node, ast.cmpop | ast.Not | ast.USub)
        if not allowed:
            raise ValueError(
                f"{type(node).__name__} is not allowed (only comparisons, and/or/not, "
                "metadata names and constants)"
            )
    return tree.body


def evaluate(text: str, metadata: Mapping[str, Any]) -> bool:
    """The truth of ``text`` over ``metadata``; PostProcessError for a name it lacks or a
    comparison that cannot be made."""
    try:
        return bool(_eval(check_expression(text), metadata))
    except ValueError as exc:
        raise PostProcessError(str(exc)) from None
    except TypeError as exc:
        raise PostProcessError(f"cannot evaluate {text!r}: {exc}") from None


def _eval(node: ast.expr, names: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[node.id]
        if node.id not in names:
            known = ", ".join(sorted(names)) or "none"
            raise PostProcessError(f"no metadata {node.id!r} (the job has: {known})")
        return names[node.id]
    if isinstance(node, ast.Tuple | ast.List):
        return [_eval(e, names) for e in node.elts]
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, names)
        return (not value) if isinstance(node.op, ast.Not) else -value
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            return all(_eval(v, names) for v in node.values)
        return any(_eval(v, names) for v in node.values)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, names)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = _eval(comparator, names)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    raise ValueError(f"{type(node).__name__} is not allowed")


class MetadataExpression(traitlets.Unicode):  # type: ignore[type-arg]
    """A condition over metadata, checked when set."""

    info_text = 'a condition over the job\'s metadata, e.g. "events > 100 and ok"'

    def validate(self, obj: Any, value: Any) -> str:
        text: str = super().validate(obj, value)
        if text:
            try:
                check_expression(text)
            except ValueError as exc:
                raise traitlets.TraitError(
                    f"expected {self.info_text}, got {text!r}: {exc}"
                ) from None
        return text
