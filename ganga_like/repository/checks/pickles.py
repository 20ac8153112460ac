"""Reading a record's two pickles (class, state) without importing any class.

The full check decodes every record this way: a class is only named (and must be a dotted
identifier), and the object ids the record refers to are collected, in every form ZODB
writes a persistent reference in.
"""

from __future__ import annotations

import functools
import io
import pickle
from typing import Any

__all__ = ["Anything", "NullUnpickler", "class_name", "memo_in_order", "reference_oid"]


def memo_in_order(unpickler: pickle.Unpickler) -> bool:
    """A pickler numbers its memo entries 0, 1, 2, ... across a record's two pickles, so
    a changed memo number (which decodes without error) leaves a gap in the numbers."""
    keys = unpickler.memo.copy().keys()
    return not keys or (min(keys) == 0 and max(keys) == len(keys) - 1)


class Anything:
    """Stands for any class or instance while a pickle is decoded without importing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.name = ""

    def __call__(self, *args: Any, **kwargs: Any) -> Anything:
        return Anything()

    def __setstate__(self, state: Any) -> None:
        pass

    def __setitem__(self, key: Any, value: Any) -> None:
        pass

    def append(self, value: Any) -> None:
        pass

    def extend(self, values: Any) -> None:
        pass

    def add(self, value: Any) -> None:
        pass


class NullUnpickler(pickle.Unpickler):
    """Decodes a record: classes are only named (and must be dotted identifiers), the
    object ids it refers to are collected."""

    def __init__(self, stream: io.BytesIO) -> None:
        super().__init__(stream)
        self.refs: list[int] = []

    def find_class(self, module: str, name: str) -> Any:
        for part in (*module.split("."), *name.split(".")):
            if not part.isidentifier():
                raise pickle.UnpicklingError(f"class name {module}.{name} is not a name")
        return _stand_in(f"{module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        oid = reference_oid(pid)
        if oid is None:
            raise pickle.UnpicklingError(f"a reference of unknown form {pid!r}")
        self.refs.append(int.from_bytes(oid, "big"))
        return Anything()


@functools.lru_cache(maxsize=4096)
def _stand_in(name: str) -> type[Anything]:
    """A class standing for the class ``name``: a class, not an instance, because a
    pickle may create an object with ``cls.__new__(cls)`` (NEWOBJ, as for a frozen
    dataclass such as a function pickled by value), which needs a real class."""
    return type("Anything", (Anything,), {"name": name})


def reference_oid(pid: Any) -> bytes | None:
    """The object id in each form ZODB writes a persistent reference in."""
    if isinstance(pid, bytes):
        return pid if len(pid) == 8 else None
    if isinstance(pid, tuple) and pid and isinstance(pid[0], bytes) and len(pid[0]) == 8:
        return pid[0]
    if isinstance(pid, list) and len(pid) >= 2 and pid[0] in ("w", "m", "n", "o"):
        target = pid[1] if isinstance(pid[1], (list, tuple)) else [pid[1]]
        if pid[0] in ("m", "n") and len(target) >= 2:
            target = target[1:]
        oid = target[0] if target else None
        if isinstance(oid, bytes) and len(oid) == 8:
            return oid
        return None
    return None


def class_name(klass: Any) -> str:
    if isinstance(klass, tuple) and klass:
        klass = klass[0]
    name = getattr(klass, "name", "")
    return name.rsplit(".", 1)[-1] if name else "?"
