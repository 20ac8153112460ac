"""The program a PythonFunction (sub)job runs: ``python -m ganga_like_std.pycall call.pickle``.

It reads the function and its arguments from the call file (staged into the work
directory), calls the function and writes what it returned into the work directory, from
where the backend collects it into the output directory:

``result.pickle``  the return value, pickled (cloudpickle where plain pickle cannot)
``result.json``    ``{"repr": repr(value)}``, plus ``"value"`` when it is JSON data

Exit codes: 0 done; 1 the function raised (its traceback is on stderr); 2 the call could
not be loaded (the function cannot be imported or unpickled here); 3 the return value
cannot be pickled. Every failure ends with one line on stderr saying which.

Only the standard library is imported (cloudpickle only when a pickle needs it): this runs
once per subjob, on a batch node or a Dask worker, and must start fast without the rest of
``ganga_like``.
"""

from __future__ import annotations

import importlib
import json
import os
import pickle
import sys
import traceback
from typing import Any

__all__ = ["CALL_FILE", "RESULT_FILE", "RESULT_JSON", "load_call", "main", "resolve"]

CALL_FILE = "call.pickle"
RESULT_FILE = "result.pickle"
RESULT_JSON = "result.json"

EXIT_RAISED = 1
EXIT_UNLOADABLE = 2
EXIT_UNPICKLABLE = 3


def resolve(dotted: str) -> Any:
    """The object named ``package.module.attr[.attr...]``: the longest importable module
    prefix, then attributes. Raises ImportError or AttributeError saying what is missing."""
    parts = dotted.split(".")
    error: BaseException | None = None
    for cut in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            target: Any = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            # Only a missing prefix means "try a shorter one"; a module that exists but
            # fails to import reports its own error.
            if exc.name is None or not module_name.startswith(exc.name):
                raise
            error = error or exc
            continue
        for name in parts[cut:]:
            try:
                target = getattr(target, name)
            except AttributeError:
                if error is not None:  # a longer prefix is no module: say that
                    raise error from None
                raise AttributeError(f"{'.'.join(parts[:cut])} has no attribute {name!r}") from None
        return target
    raise ImportError(f"no module named {parts[0]!r}") from error


def load_call(path: str) -> tuple[Any, list[Any], dict[str, Any]]:
    """The function, positional and keyword arguments a call file holds."""
    with open(path, "rb") as handle:
        call = pickle.load(handle)
    for entry in call.get("sys_path", ()):
        # The submitting session's import path, after this interpreter's own: a function
        # importable where it was submitted is importable here (same machine or file
        # system); entries missing here are harmless.
        if entry not in sys.path:
            sys.path.append(entry)
    function = call["function"]
    function = resolve(function) if isinstance(function, str) else pickle.loads(function)
    return function, list(call["args"]), dict(call["kwargs"])


def _dumps(value: Any) -> bytes:
    try:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        try:
            import cloudpickle
        except ImportError:
            raise
        data: bytes = cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        return data


def _write(path: str, data: bytes) -> None:
    # Written whole, then renamed: a reader never sees half a result.
    partial = path + ".partial"
    with open(partial, "wb") as handle:
        handle.write(data)
    os.replace(partial, path)


def _json(value: Any) -> bytes:
    shown: dict[str, Any] = {"repr": _safe_repr(value)}
    try:
        text = json.dumps({**shown, "value": value}, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        text = json.dumps(shown)
    return text.encode() + b"\n"


def _safe_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # a broken __repr__ must not fail a finished call
        text = f"<{type(value).__name__} whose repr failed: {exc}>"
    return text if len(text) <= 10_000 else text[:10_000] + "…"


def main(argv: list[str]) -> int:
    path = argv[1] if len(argv) > 1 else CALL_FILE
    work = os.getcwd()  # where the backend collects from, even if the function moves away
    try:
        function, args, kwargs = load_call(path)
    except BaseException as exc:
        traceback.print_exc()
        print(f"PythonFunction: the call in {path} cannot be loaded here: {exc}", file=sys.stderr)
        return EXIT_UNLOADABLE
    name = getattr(function, "__qualname__", None) or repr(function)
    try:
        value = function(*args, **kwargs)
    except BaseException as exc:  # SystemExit too: the function did not return
        traceback.print_exc()
        print(f"PythonFunction: {name}() raised {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_RAISED
    try:
        data = _dumps(value)
    except Exception as exc:
        print(
            f"PythonFunction: the return value of {name}() (a {type(value).__name__}) "
            f"cannot be pickled: {type(exc).__name__}: {exc}",
            file=sys.stderr,
        )
        return EXIT_UNPICKLABLE
    _write(os.path.join(work, RESULT_JSON), _json(value))
    _write(os.path.join(work, RESULT_FILE), data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
