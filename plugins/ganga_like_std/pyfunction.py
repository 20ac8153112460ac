"""What PythonFunction stores and sends: the function (by dotted name, or pickled by value),
its arguments, the call file written at submission and the result read back.

A function is stored by name whenever that name finds the same function again (anything
defined in an importable module); only what cannot be found by name (a function defined in
``__main__``, a notebook, a lambda or a closure) is pickled by value, which needs
cloudpickle. Arguments are stored in the repository like every other attribute, so they
must pickle by plain pickle with no reference to ``__main__``.
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import traitlets

from ganga_like.errors import JobError
from ganga_like.model.values import plain_pickle
from ganga_like_std.pycall import RESULT_FILE, resolve

__all__ = [
    "FunctionRef",
    "Picklable",
    "PickledFunction",
    "call_bytes",
    "function_label",
    "load_function",
    "plain_pickle",
    "read_result",
]

_PROTOCOL = pickle.HIGHEST_PROTOCOL


@dataclass(frozen=True)
class PickledFunction:
    """A callable stored by value, for one that cannot be found by name where it runs."""

    name: str
    data: bytes
    # What ``export`` says when asked to write one: bytes of pickle are no GPI text.
    gpi_text_hint: ClassVar[str] = (
        "name the function instead, PythonFunction(function='module.function'), "
        "with it defined in an importable module"
    )

    def __repr__(self) -> str:
        return f"<function {self.name}, pickled>"

    def load(self) -> Any:
        return pickle.loads(self.data)


def _cloudpickle() -> Any:
    """The cloudpickle module, or None when it is not installed."""
    try:
        import cloudpickle
    except ImportError:
        return None
    return cloudpickle


def importable_name(function: Any) -> str | None:
    """``module.qualname`` when that name finds ``function`` again, else None."""
    module = getattr(function, "__module__", None)
    qualname = getattr(function, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        return None
    if module == "__main__" or "<" in qualname:  # a script's, a lambda, a local function
        return None
    name = f"{module}.{qualname}"
    try:
        found = resolve(name)
    except Exception:
        return None
    return name if found is function else None


def function_label(function: Any) -> str:
    return str(getattr(function, "__qualname__", None) or type(function).__name__)


def stored_function(function: Any) -> str | PickledFunction:
    """How a callable is stored: its dotted name, or pickled by value. TraitError (one
    line) when neither works."""
    name = importable_name(function)
    if name is not None:
        return name
    label = function_label(function)
    try:
        return PickledFunction(label, plain_pickle(function))
    except Exception:
        pass  # a function of __main__, a lambda or a closure: by value, if possible
    cloudpickle = _cloudpickle()
    if cloudpickle is None:
        raise traitlets.TraitError(
            f"expected {FunctionRef.info_text}, got {label}: it cannot be found by name "
            "where the job runs (defined in __main__, a notebook or another function); "
            "define it in an importable module, or install cloudpickle to store it by value"
        )
    try:
        data: bytes = cloudpickle.dumps(function, protocol=_PROTOCOL)
    except Exception as exc:
        raise traitlets.TraitError(
            f"expected {FunctionRef.info_text}, got {label}: it cannot be pickled: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    return PickledFunction(label, data)


def _dotted(text: str) -> bool:
    parts = text.split(".")
    return len(parts) >= 2 and all(p.isidentifier() for p in parts)


class FunctionRef(traitlets.TraitType[Any, Any]):
    """A function: a dotted name ``package.module.function`` (imported at submission), or a
    callable, stored by name when it can be found by name, else pickled by value."""

    info_text = "a dotted name 'package.module.function' or a callable"
    default_value = ""

    def validate(self, obj: Any, value: Any) -> Any:
        if isinstance(value, str):
            if value and not _dotted(value):
                raise traitlets.TraitError(
                    f"expected {self.info_text}, got {value!r}: not a dotted name"
                )
            return value
        if isinstance(value, PickledFunction):
            return value
        if callable(value):
            return stored_function(value)
        self.error(obj, value)


class Picklable(traitlets.TraitType[Any, Any]):
    """A function argument: anything plain pickle stores, with no reference to __main__
    (it is kept in the repository and read back by other processes)."""

    info_text = "a picklable value"

    def validate(self, obj: Any, value: Any) -> Any:
        try:
            plain_pickle(value)
        except Exception as exc:
            # Through error(): a list or dict holding this trait words the message.
            self.error(obj, value, info=f"{self.info_text} ({type(exc).__name__}: {exc})")
        return value


def load_function(function: str | PickledFunction) -> Any:
    """The callable, loaded in this process (JobError saying why it cannot be)."""
    try:
        found = resolve(function) if isinstance(function, str) else function.load()
    except Exception as exc:
        shown = function if isinstance(function, str) else function.name
        raise JobError(
            f"PythonFunction.function: cannot load {shown!r}: {type(exc).__name__}: {exc}"
        ) from None
    if not callable(found):
        raise JobError(
            f"PythonFunction.function: {function!r} is not callable "
            f"(it is {_with_article(type(found).__name__)})"
        )
    return found


def _with_article(noun: str) -> str:
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def _as_given(value: Any) -> Any:
    """The value as the GPI shows it: the repository keeps lists as tuples, the function
    gets lists back (as ``j.application.args`` shows them)."""
    if isinstance(value, tuple):
        return [_as_given(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_given(v) for k, v in value.items()}
    return value


def call_bytes(
    function: str | PickledFunction, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> bytes:
    """The call file's content: what ``ganga_like_std.pycall`` loads and calls."""
    call = {
        "function": function if isinstance(function, str) else function.data,
        "args": _as_given(tuple(args)),
        "kwargs": _as_given(dict(kwargs)),
        "sys_path": [os.path.abspath(p) for p in sys.path],
    }
    return pickle.dumps(call, protocol=_PROTOCOL)


def read_result(output_dir: str, fqid: str) -> Any:
    """The return value a completed (sub)job left in ``output_dir``."""
    path = os.path.join(output_dir, RESULT_FILE)
    try:
        with open(path, "rb") as handle:
            return pickle.load(handle)
    except FileNotFoundError:
        raise JobError(f"job {fqid}: no result: {path} is missing") from None
    except Exception as exc:
        raise JobError(
            f"job {fqid}: its result cannot be read in this process: {type(exc).__name__}: {exc}"
        ) from None
