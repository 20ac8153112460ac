"""``export`` and ``load``: jobs, templates and plugin objects as GPI text, and back.

``export(jobs.select(name="scan*"), "scans.txt")`` writes each object as the call that makes
it, one block per object::

    Job(
        name='x',
        application=Executable(exe='/bin/echo', args=['a']),
        splitter=ArgSplitter(args=[['1'], ['2']]),
        backend=Local(),
    )

``load("scans.txt")`` gives them back as new objects: jobs as new jobs (new ids, status
new), templates as new templates. The text is never run: it is parsed with ``ast`` and only
calls of GPI classes (Job, JobTemplate and the registered plugin classes) with literal
arguments (strings, numbers, booleans, None, lists, tuples, dicts and such calls) are
built. Anything else is refused with one line naming the file and line, before anything is
created, so a file that would run code if evaluated runs nothing.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import math
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ganga_like.errors import ExportError, GangaError, LoadError, SchemaError
from ganga_like.gpi import job_templates as _job_templates  # noqa: F401  (the Job and JobTemplate proxies)
from ganga_like.gpi.arguments import given
from ganga_like.gpi.progress import Progress, progress
from ganga_like.gpi.proxy import GPIObject, check_writable, current_session, unwrap, wrap
from ganga_like.model import plugin_registry
from ganga_like.model.base import Component, GangaObject, schema_items
from ganga_like.model.job import Job as JobImpl
from ganga_like.model.parts import job_parts
from ganga_like.model.template import JobTemplate as TemplateImpl
from ganga_like.repository.templates import TemplateTable

__all__ = ["export", "load"]

HEADER = "# GPI objects, one per block; read them back with load(). Never run as code."
# A block longer than this on one line is written one attribute per line.
_LINE = 88
# The classes that are not plugins: stored in the repository when loaded.
_STORED: dict[str, type[GangaObject]] = {"Job": JobImpl, "JobTemplate": TemplateImpl}


# -- export ---------------------------------------------------------------------------


def export(objects: Any, path: str | os.PathLike[str]) -> bool:
    """Write a job, a template, any GPI plugin object, or a list or slice of them (``jobs``,
    ``templates``, ``jobs.select(...)``) to ``path`` as GPI text; ``load(path)`` reads it
    back. Only descriptions are written: no ids, statuses, subjobs or results."""
    items = [objects] if isinstance(objects, GPIObject) else _listed(objects)
    blocks = [_exported(_impl_of(item)) for item in items]
    target = _file_path("export", path, ExportError)
    text = "\n\n".join([HEADER, *blocks]) + "\n"
    try:
        # Written beside the target and renamed: an export never leaves half a file.
        fd, written = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    except OSError as exc:
        raise ExportError(f"export: cannot write {target}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(written, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(written)
        raise ExportError(f"export: cannot write {target}: {exc.strerror or exc}") from None
    return True


def _listed(objects: Any) -> list[Any]:
    if isinstance(objects, str | bytes) or not isinstance(objects, Iterable):
        raise SchemaError(
            f"export: expected a job, a template, a GPI object or a list of them, "
            f"not {type(objects).__name__}"
        )
    return list(objects)


def _impl_of(item: Any) -> GangaObject:
    impl = unwrap(item)
    if not isinstance(impl, GangaObject):
        raise SchemaError(f"export: not a GPI object: {item!r}")
    return impl


class _Unwritable(Exception):
    """A value GPI text cannot hold; the message says where in the object and why."""


def _exported(impl: GangaObject) -> str:
    try:
        return _block(impl)
    except _Unwritable as exc:
        # Named by the object it is in: in a list of a thousand jobs, which one.
        raise SchemaError(f"export: {_owner(impl)}{exc}") from None


def _owner(impl: GangaObject) -> str:
    if isinstance(impl, JobImpl):
        return f"job {impl.fqid}: "
    if isinstance(impl, TemplateImpl):
        return f"template {impl.id}: "
    return ""


def _fields(impl: GangaObject) -> list[tuple[str, str]]:
    """(attribute, value text) of what describes ``impl``: its public attributes that users
    set, those at their defaults left out, and a default component that was taken away
    written as None (loading would otherwise put the default back)."""
    state = impl.stored()
    skip: set[str] = set()
    if isinstance(impl, JobImpl) and impl.master is not None:
        skip = {part.name for part in job_parts().master_only}  # a subjob's, as copy() does
    where = type(impl).__name__
    fields = []
    for name, trait in schema_items(type(impl)):
        if trait.metadata.get("protected") or name in skip:
            continue
        if name in state:
            fields.append((name, _value_text(state[name], f"{where}.{name}")))
        elif isinstance(trait, Component) and trait.default_plugin:
            fields.append((name, "None"))
    return fields


def _call_text(impl: GangaObject) -> str:
    args = ", ".join(f"{name}={text}" for name, text in _fields(impl))
    return f"{type(impl).__name__}({args})"


def _block(impl: GangaObject) -> str:
    one_line = _call_text(impl)
    if len(one_line) <= _LINE:
        return one_line
    lines = [f"    {name}={text}," for name, text in _fields(impl)]
    return "\n".join([f"{type(impl).__name__}(", *lines, ")"])


def _value_text(value: Any, where: str) -> str:
    if isinstance(value, GangaObject):
        return _call_text(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value_text(v, where) for v in value) + "]"
    if isinstance(value, dict):
        pairs = (f"{_value_text(k, where)}: {_value_text(v, where)}" for k, v in value.items())
        return "{" + ", ".join(pairs) + "}"
    if isinstance(value, float) and not math.isfinite(value):
        raise _Unwritable(f"{where} is {value!r}, which GPI text cannot hold")
    if value is None or isinstance(value, str | int | float | bool):
        return repr(value)
    hint = getattr(value, "gpi_text_hint", None)
    if isinstance(hint, str):
        raise _Unwritable(f"{where} is {value!r}, which GPI text cannot hold; {hint}")
    raise _Unwritable(
        f"{where} holds a {type(value).__name__} "
        "(from a missing plugin, or not a plain value), which GPI text cannot hold"
    )


# -- load -----------------------------------------------------------------------------


class _Refused(Exception):
    """Something in the file that is not GPI text: the message, and the node it is at."""

    def __init__(self, node: ast.AST, message: str) -> None:
        super().__init__(message)
        self.line = getattr(node, "lineno", 0)


def load(path: str | os.PathLike[str]) -> list[Any]:
    """The objects written in ``path`` by ``export``: jobs become new jobs (new ids, status
    new), templates new templates, plugin objects new unattached objects.

    The file is parsed, never run; anything but GPI classes called with literal values is
    refused with one line naming the file and line, and then nothing is created."""
    source = _file_path("load", path, LoadError)
    # A large export takes a while (parsing, then each object, then one commit): shown
    # once it has lasted half a second, like the other long GPI operations.
    with progress(f"loading {source.name}", delay=0.5) as bar, _collector_paused():
        bar.update(0, None, "parsing")
        built = _built(source, _read(source), bar)
        return _stored(source, built, bar)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector held off while the file is parsed and its objects built
    and stored: each of its full passes walks every object made so far (the syntax tree
    and the objects it becomes, millions in a large file), so running them as the objects
    grow made a load slower than linear in the file's size. Process-wide, for the load's
    duration only: the objects of a load hold no cycles to free meanwhile."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _built(source: Path, text: str, bar: Progress) -> list[GangaObject]:
    """Every object of the file, built and checked; nothing is stored yet."""
    try:
        tree = ast.parse(text, filename=str(source))
    except SyntaxError as exc:
        raise LoadError(f"{source}:{exc.lineno or 0}: not GPI text: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError) as exc:
        raise LoadError(f"{source}: not GPI text: {type(exc).__name__}") from None
    built: list[GangaObject] = []
    total = len(tree.body)
    for done, statement in enumerate(tree.body):
        if done % 100 == 0:
            bar.update(done, total, f"{done} of {total} objects")
        try:
            built.append(_object(statement))
        except _Refused as exc:
            raise LoadError(f"{source}:{exc.line}: {exc}") from None
        except RecursionError:
            raise LoadError(f"{source}:{statement.lineno}: nested too deep") from None
    bar.update(total, total, f"{total} of {total} objects")
    return built


def _stored(source: Path, built: list[GangaObject], bar: Progress) -> list[Any]:
    """The jobs and templates of ``built`` added to the repository, in one transaction."""
    stored = [impl for impl in built if type(impl).__name__ in _STORED]
    if stored:
        bar.update(len(built), len(built), f"saving {len(stored)} job(s) and template(s)")
        session = current_session()

        def add_all() -> None:
            registry = session.registry()
            table = TemplateTable(registry.root)
            for impl in stored:
                if isinstance(impl, JobImpl):
                    registry.add(impl)
                else:
                    table.add(impl)

        session.repo.in_transaction(add_all, what=f"loading {source}")
    return [_gpi(impl) for impl in built]


def _file_path(where: str, path: object, error: type[GangaError]) -> Path:
    """``path`` as a Path: a str or path object without a NUL byte; anything else is one
    line naming the action, not the TypeError or ValueError of os.fspath."""
    named = os.fspath(path) if isinstance(path, str | os.PathLike) else None
    if not isinstance(named, str):
        raise error(f"{where}: expected a file path, not {given(path)}")
    if "\0" in named:
        raise error(f"{where}: expected a file path without a NUL byte, not {given(path)}")
    return Path(named)


def _read(source: Path) -> str:
    try:
        return source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LoadError(f"load: no such file: {source}") from None
    except UnicodeDecodeError:
        raise LoadError(f"load: {source} is not a text file (not UTF-8)") from None
    except OSError as exc:
        raise LoadError(f"load: cannot read {source}: {exc.strerror or exc}") from None


def _gpi(impl: GangaObject) -> Any:
    return wrap(impl)


def _object(statement: ast.stmt) -> GangaObject:
    if not isinstance(statement, ast.Expr) or not isinstance(statement.value, ast.Call):
        raise _Refused(
            statement,
            f"{_shown(statement)} is not allowed: each block is one GPI object, "
            "e.g. Job(name='x', backend=Local())",
        )
    return _call(statement.value)


def _call(node: ast.Call) -> GangaObject:
    if not isinstance(node.func, ast.Name):
        raise _Refused(node, f"{_shown(node)} is not allowed: only GPI classes may be called")
    cls = _class(node.func)
    positional = cls._positional
    if len(node.args) > len(positional):
        raise _Refused(
            node,
            f"{cls.__name__}() takes at most {len(positional)} positional argument(s) "
            f"({', '.join(positional) or 'none'}), {len(node.args)} given",
        )
    values: dict[str, Any] = {}
    for name, arg in zip(positional, node.args, strict=False):
        values[name] = _literal(arg)
    for keyword in node.keywords:
        if keyword.arg is None:
            raise _Refused(keyword.value, "'**' arguments are not allowed")
        if keyword.arg in values:
            raise _Refused(keyword.value, f"{cls.__name__}: {keyword.arg!r} given twice")
        values[keyword.arg] = _literal(keyword.value)
    try:
        for name in values:
            check_writable(cls, name)
        return cls(**values)
    except (GangaError, TypeError, ValueError) as exc:
        raise _Refused(node, " ".join(str(exc).split())) from None


def _class(name: ast.Name) -> type[GangaObject]:
    known = _STORED.get(name.id)
    if known is not None:
        return known
    if name.id not in plugin_registry.known_names():
        raise _Refused(
            name,
            f"unknown class {name.id!r}: only Job, JobTemplate and plugin classes are allowed",
        )
    try:
        found: type[GangaObject] = plugin_registry.find(name.id)
    except GangaError as exc:
        raise _Refused(name, str(exc)) from None
    return found


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        if node.value is None or isinstance(node.value, str | int | float | bool):
            return node.value
        raise _Refused(node, f"{_shown(node)} is not allowed: not a str, number, bool or None")
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub | ast.UAdd)
        and isinstance(node.operand, ast.Constant)
        and isinstance(node.operand.value, int | float)
        and not isinstance(node.operand.value, bool)
    ):
        return -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
    if isinstance(node, ast.List):
        return [_literal(item) for item in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_literal(item) for item in node.elts)
    if isinstance(node, ast.Dict):
        out: dict[Any, Any] = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                raise _Refused(value, "'**' in a dict is not allowed")
            out[_hashable(key)] = _literal(value)
        return out
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id in _STORED:
            raise _Refused(node, f"a {node.func.id} is a block of its own, not a value")
        return _call(node)
    if isinstance(node, ast.Starred):
        raise _Refused(node, "'*' arguments are not allowed")
    raise _Refused(node, f"{_shown(node)} is not allowed: {_kind(node)}")


def _hashable(node: ast.expr) -> Any:
    key = _literal(node)
    try:
        hash(key)
    except TypeError:
        raise _Refused(node, f"{_shown(node)} cannot be a dict key") from None
    if isinstance(key, GangaObject):
        raise _Refused(node, f"{_shown(node)} cannot be a dict key")
    return key


def _kind(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return "names are not values here (write the value itself)"
    if isinstance(node, ast.Attribute):
        return "attribute access is not allowed"
    if isinstance(node, ast.Lambda):
        return "lambdas are not allowed"
    return "only literal values and GPI objects are allowed"


def _shown(node: ast.AST) -> str:
    """The refused code as written, on one line and short."""
    try:
        text = " ".join(ast.unparse(node).split())
    except (RecursionError, ValueError):
        text = type(node).__name__
    return "`" + (text if len(text) <= 60 else text[:57] + "...") + "`"
