"""List options written as text, alike on the command line, in the config file and at runtime.

``--Display.columns=fqid,status``, ``c.Display.columns = "fqid,status"`` and
``config.Display.columns = "fqid,status"`` all give ``["fqid", "status"]``: what a user
types for a list whose items can never hold a comma (a closed set of words, or numbers), so
the comma is unambiguous there. An item of any other list might hold one, so such a list is
given one item per option (``--Section.option=a --Section.option=b``) or as a Python list.
A refused value gets one line naming what is wrong and showing how a list is written where
it was given.
"""

from __future__ import annotations

from typing import Any, Literal

from traitlets import Dict, Enum, Float, Int, List, Set, TraitError, TraitType
from traitlets.config import Configurable

__all__ = ["Where", "comma_separated", "help_text", "refusal", "split_commas"]

Where = Literal["command line", "config file", "config"]
"""Where a value was given: ``--Section.option=...``, ``c.Section.option = ...`` in the
config file, or ``config.Section.option = ...`` at runtime."""


def comma_separated(trait: TraitType[Any, Any]) -> bool:
    """Whether ``trait`` is a list whose items can never hold a comma."""
    if not isinstance(trait, (List, Set)):
        return False
    item = trait._trait
    if isinstance(item, Enum):
        return all("," not in str(value) for value in item.values or ())
    return isinstance(item, (Int, Float))


def split_commas(trait: TraitType[Any, Any], value: Any) -> Any:
    """``value`` with each text in it split at its commas (blanks around items and empty
    items dropped, numbers cast), for an option of :func:`comma_separated`; any other
    value, or option, as it is. ``"fqid, status"`` and ``["fqid,status"]`` (what the
    command line gives) are ``["fqid", "status"]``."""
    if not comma_separated(trait):
        return value
    if isinstance(value, str):
        texts = [value]
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        texts = value  # a plain list, or the command line's DeferredConfigList
    else:
        return value
    items = [part.strip() for text in texts for part in text.split(",")]
    return [_cast(trait, item) for item in items if item]


def _cast(trait: Any, item: str) -> Any:
    try:
        return trait.item_from_string(item)
    except Exception:  # left as text: validating it names the item that is wrong
        return item


def help_text(cls: type[Configurable]) -> str:
    """``cls.class_get_help()``, with each comma-separated list shown so
    (``--Display.columns=<item>,<item>,...``) rather than as traitlets' one item an
    option (``--Display.columns=<list-item-1>...``, which still works)."""
    text: str = cls.class_get_help()
    for name, trait in cls.class_traits(config=True).items():
        if comma_separated(trait):
            sample = f"<{type(trait).__name__.lower()}-item-1>..."
            text = text.replace(
                f"--{cls.__name__}.{name}={sample}\n",
                f"--{cls.__name__}.{name}=<item>,<item>,...\n",
            )
    return text


def refusal(
    section: str, option: str, trait: TraitType[Any, Any], value: Any, short: str, where: Where
) -> str:
    """Why ``value`` was refused for ``section.option``, in one line: what is wrong and,
    for a list or dict option, how one is written ``where`` it was given. ``short`` is the
    error's own words, used when there is nothing better to say."""
    what = _what_is_wrong(trait, value, where) or short
    # A dict's own checks (a bad colour) need no lesson in how a dict is written, but on
    # the command line one may have been written as a list ("running=red,failed=blue").
    shape = not isinstance(value, dict) or where == "command line"
    how = _written(f"{section}.{option}", trait, where) if shape else ""
    return f"{what}; {how}" if how else what


def _what_is_wrong(trait: Any, value: Any, where: Where) -> str:
    if isinstance(trait, Dict) and where == "command line" and isinstance(value, list):
        # Texts traitlets could not read as KEY=VALUE.
        return f"expected KEY=VALUE, not {' '.join(map(str, value))!r}"
    if not isinstance(trait, (List, Set)) or not isinstance(value, (list, set, tuple)):
        return ""
    item = trait._trait
    for element in value if item is not None else ():
        try:
            item.validate(None, element)
        except TraitError:
            if isinstance(item, Enum):
                return f"{element!r} is not one of {', '.join(map(str, item.values or ()))}"
            return f"{element!r} is not {item.info()}"
    if len(value) < trait._minlen:
        return f"needs at least {_items(trait._minlen)}"
    if len(value) > trait._maxlen:
        return f"takes at most {_items(trait._maxlen)}"
    return ""


def _items(n: int) -> str:
    return f"{n} item" if n == 1 else f"{n} items"


def _written(name: str, trait: Any, where: Where) -> str:
    """How a list or dict option is written ``where``, with an example; empty for any
    other option."""
    if isinstance(trait, Dict):
        key, val = _dict_example(trait)
        if where == "command line":
            return f"write one --{name}={key}={val} per key"
        return f"write {_prefix(where)}{name} = {{{key!r}: {val!r}}}"
    if not isinstance(trait, (List, Set)):
        return ""
    first, second = _list_example(trait)
    if where != "command line":
        return f"write a list as {_prefix(where)}{name} = [{first!r}, {second!r}]"
    if comma_separated(trait):
        return f"write a list as --{name}={first},{second}"
    return f"write a list as --{name}={first} --{name}={second}"


def _prefix(where: Where) -> str:
    return "c." if where == "config file" else "config."


def _list_example(trait: Any) -> tuple[Any, Any]:
    item = trait._trait
    if isinstance(item, Enum) and item.values:
        values = list(item.values)
        return values[0], values[1] if len(values) > 1 else values[0]
    if isinstance(item, Int):
        return 1, 2
    if isinstance(item, Float):
        return 1.5, 2.5
    example = [*(trait.default() or ()), "a", "b"]
    return example[0], example[1]


def _dict_example(trait: Any) -> tuple[Any, Any]:
    # An entry of the default that shows a real value ("running=green", not "new=default").
    entries = [(k, v) for k, v in dict(trait.default() or {}).items() if v not in ("", "default")]
    return entries[0] if entries else ("key", "value")
