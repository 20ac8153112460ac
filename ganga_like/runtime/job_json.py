"""A job's definition as JSON: to share it, or re-run it elsewhere.

Only the description travels (application, backend, splitter, dataset, files, name,
comment), never status, history or ids. Components are written as ``{"type": plugin name,
attribute: value, ...}`` with only the attributes that differ from their defaults, and read
back through the same validation as the GPI, so a file someone edited by hand gets the same
clear errors as a typo at the prompt.
"""

from __future__ import annotations

from typing import Any

from ganga_like.errors import GangaError, SchemaError
from ganga_like.model import plugin_registry
from ganga_like.model.base import GangaObject, check_depth, schema_items
from ganga_like.model.job import Job

__all__ = ["FORMAT", "from_json", "to_json"]

FORMAT = "ganga_like.job/1"


def to_json(job: Job) -> dict[str, Any]:
    data = _object(job)
    data.pop("type", None)
    return {"format": FORMAT, "job": data}


def _object(obj: GangaObject) -> dict[str, Any]:
    out: dict[str, Any] = {"type": type(obj).__name__}
    for name, trait in schema_items(type(obj)):
        if trait.metadata.get("protected") or not trait.metadata.get("copyable", True):
            continue
        if name not in obj.stored():
            continue  # at its default
        out[name] = _value(obj.stored()[name])
    return out


def _value(value: Any) -> Any:
    if isinstance(value, GangaObject):
        return _object(value)
    if isinstance(value, tuple | list):
        return [_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _value(v) for k, v in value.items()}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise GangaError(f"cannot export a value of type {type(value).__name__}")


def from_json(document: Any) -> Job:
    """A new, unattached Job built from an exported document (validated)."""
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise GangaError(f'not a job export: expected an object with "format": "{FORMAT}"')
    body = document.get("job")
    if not isinstance(body, dict):
        raise GangaError('a job export needs a "job" object')
    job = Job()
    _fill(job, body, "job")
    return job


def _fill(obj: GangaObject, body: dict[str, Any], where: str) -> None:
    for name, raw in body.items():
        if name == "type":
            continue
        trait = type(obj)._schema.get(name)
        if trait is None or trait.metadata.get("protected"):
            raise SchemaError(f"{where}: {type(obj).__name__} has no settable attribute {name!r}")
        # Before building: _build recurses once per level of the file's nesting.
        check_depth(type(obj), name, raw, f"{where}.{name}")
        obj._assign(name, _build(raw, f"{where}.{name}"))


def _build(raw: Any, where: str) -> Any:
    if isinstance(raw, dict) and "type" in raw:
        cls = plugin_registry.find(str(raw["type"]))
        component = cls()
        _fill(component, raw, where)
        return component
    if isinstance(raw, list):
        return [_build(v, f"{where}[{i}]") for i, v in enumerate(raw)]
    return raw
