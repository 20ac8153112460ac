"""docs/architecture.md's pictures are the code's: regenerated, they come out the same."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "architecture_picture", ROOT / "scripts" / "architecture_picture.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


picture = _script()


def test_the_documented_pictures_match_the_code() -> None:
    text = picture.DOC.read_text()
    assert picture.written(text) == text, (
        "docs/architecture.md's picture no longer matches the code: "
        "run python scripts/architecture_picture.py --write"
    )


def test_every_process_the_code_starts_by_module_is_in_the_picture() -> None:
    """A ``*_MODULE = "..."`` constant names what a process runs with ``python -m``."""
    drawn = {module for _, module, _ in picture.PROCESSES}
    modules = dict(picture.sources())
    started = set()
    for _, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            target = node.targets[0] if isinstance(node, ast.Assign) else None
            target = node.target if isinstance(node, ast.AnnAssign) else target
            value = getattr(node, "value", None)
            if (
                isinstance(target, ast.Name)
                and target.id.endswith("_MODULE")
                and isinstance(value, ast.Constant)
                and isinstance(value.value, str)
                and (value.value in modules or f"{value.value}.__main__" in modules)
            ):
                started.add(value.value)
    assert started, "found no process module constant: the search is broken"
    assert started <= drawn, f"processes missing from the picture: {sorted(started - drawn)}"


def _reach(edges: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(edges.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(edges.get(node, ()))
    return seen


graphs = st.dictionaries(
    st.sampled_from("abcdefgh"), st.sets(st.sampled_from("abcdefgh"), max_size=4), max_size=8
).map(
    lambda g: {
        n: {t for t in targets if t != n}
        for n, targets in {**{t: set() for ts in g.values() for t in ts}, **g}.items()
    }
)


@given(graphs)
def test_the_reduced_picture_reaches_what_the_imports_reach(edges: dict[str, set[str]]) -> None:
    kept = picture.reduced(edges)
    assert all(kept[n] <= edges[n] for n in edges)
    for node in edges:
        assert _reach(kept, node) == _reach(edges, node)
