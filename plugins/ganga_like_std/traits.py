"""Trait types shared by the built-in plugins."""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

import traitlets

__all__ = ["Arg", "PythonModule", "module_problem"]


class Arg(traitlets.Unicode):  # type: ignore[type-arg]
    """A command-line argument: a string; numbers are accepted and turned into strings."""

    info_text = "a string or a number"

    def validate(self, obj: Any, value: Any) -> str:
        if isinstance(value, bool):
            self.error(obj, value)
        if isinstance(value, int | float):
            return str(value)
        result: str = super().validate(obj, value)
        return result


class PythonModule(traitlets.Unicode):  # type: ignore[type-arg]
    """The path of a user's Python file that must define ``function``: checked when set
    (parsed, not run), stored as an absolute path so that the monitor finds it."""

    def __init__(self, function: str, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.function = function
        self.info_text = f"a Python file defining {function}()"

    def validate(self, obj: Any, value: Any) -> str:
        text: str = super().validate(obj, value)
        if not text:
            return text
        problem = module_problem(text, self.function)
        if problem is not None:
            raise traitlets.TraitError(f"expected {self.info_text}, got {text!r}: {problem}")
        return os.path.abspath(os.path.expanduser(text))


def module_problem(text: str, function: str) -> str | None:
    """Why the Python file ``text`` cannot serve (it is parsed, not run), or None."""
    path = os.path.abspath(os.path.expanduser(text))
    try:
        source = Path(path).read_text()
    except OSError as exc:
        return str(exc.strerror)
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        return f"syntax error line {exc.lineno}"
    defined = {
        node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    if function not in defined:
        return f"it has no {function}()"
    return None
