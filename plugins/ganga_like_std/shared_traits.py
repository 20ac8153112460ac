"""Trait types shared by the built-in plugins."""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

import traitlets

from ganga_like.model.text import Text

__all__ = ["Arg", "OutputName", "PythonModule", "SplitArg", "module_problem"]


class Arg(Text):
    """A command-line argument: a string; numbers are accepted and turned into strings.
    It may hold any character but a NUL byte, which no argument can pass."""

    info_text = "a string or a number"

    def validate(self, obj: Any, value: Any) -> str:
        if isinstance(value, bool):
            self.error(obj, value)
        if isinstance(value, int | float):
            return str(value)
        result: str = super().validate(obj, value)
        return result


class OutputName(Text):
    """A name or wildcard of a file in a job's output directory, relative to it: an
    absolute path or a ``..`` would reach outside it, where a merger would read (and, told
    to overwrite, replace) the user's own files."""

    def validate(self, obj: Any, value: Any) -> str:
        text = super().validate(obj, value)
        outside = None
        if os.path.isabs(text) or text.startswith("~"):
            outside = "an absolute path"
        elif ".." in text.replace("\\", "/").split("/"):
            outside = "a path through '..'"
        if outside is not None:
            # Through error(): in a list, the list words the message.
            self.error(
                obj, value, info=f"{self.info_text} inside the output directory (this is {outside})"
            )
        return text


_PLAIN = (str, int, float, bool, bytes, type(None))


class SplitArg(traitlets.TraitType[Any, Any]):
    """An argument a splitter hands to an application: plain data (a string, a number,
    True/False, None, bytes, or a list or dict of these), kept as given. The application
    validates what it receives: Executable turns numbers into strings and refuses the rest,
    PythonFunction passes the values to its function as they are."""

    info_text = "a string, a number, True/False, None, bytes, or a list or dict of these"

    def validate(self, obj: Any, value: Any) -> Any:
        if not _plain(value):
            self.error(obj, value)
        return value


def _plain(value: Any) -> bool:
    # Depth is bounded before this runs (the schema refuses lists nested too deep).
    if isinstance(value, _PLAIN):
        return True
    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


class PythonModule(Text):
    """The path of a user's Python file that must define ``function``: checked when set
    (parsed, not run), stored as an absolute path so that the monitor finds it."""

    def __init__(self, function: str, **kwargs: Any) -> None:
        super().__init__("", what=f"a Python file defining {function}()", **kwargs)
        self.function = function

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
