"""The import graph of ganga_like and its plugins: no cycles, nothing imported upward.

Every module under ``ganga_like/`` and ``plugins/`` is parsed with ``ast`` (nothing is
imported), and every import counts: at the top, inside functions (lazy), and under
``TYPE_CHECKING``.  The one exception is the notebook extension hook of
``ganga_like/__init__.py`` (``load_ipython_extension``/``unload_ipython_extension``), which
loads the shell on demand.

Layers (docs: shared DESIGN): shell (with ``commands``, ``cli`` and the package's
``__init__``) > gpi > runtime > model > repository > the base (errors, private, config,
query, detached, hosts, excepthook).  A module may import its own layer and those below.
Plugins may import the model, errors, private, a core batch base (``ganga_like.batch``),
``ganga_like.detached`` and ``ganga_like.hosts``; never the runtime, shell, GPI or
repository.  No plugin imports another, except the runner plugin
(``ganga_like_runner``), through its public modules.

The same parse keeps the rooms sized to be read (no module over 600 lines, no function
over 80), the model's state its own (nothing outside ``ganga_like/model/`` writes an
object's ``__dict__``), the plugins free of module-level mutable state, and each module's
name its own (no two modules share a last name, but a few that say why).
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ROOT / "plugins"

# Imports known to break the rules, each removed by work under way: an entry that no longer
# exists fails ``test_the_allow_lists_hold_only_imports_that_still_exist``, so the lists
# only shrink.
ALLOWED_CYCLE_EDGES: set[tuple[str, str]] = set()
ALLOWED_UPWARD: set[tuple[str, str]] = set()

LAYERS = {"shell": 5, "gpi": 4, "runtime": 3, "model": 2, "repository": 1, "base": 0}
# First part after ``ganga_like.`` -> layer.
CORE_LAYER = {
    "shell": "shell",
    "commands": "shell",
    "web": "shell",
    "cli": "shell",
    "gpi": "gpi",
    "runtime": "runtime",
    "model": "model",
    "batch": "model",
    "repository": "repository",
    "errors": "base",
    "private": "base",
    "config": "base",
    "query": "base",
    "detached": "base",
    "hosts": "base",
    "excepthook": "base",
}
PLUGIN_MAY_IMPORT = (
    "ganga_like.model",
    "ganga_like.errors",
    "ganga_like.private",
    "ganga_like.batch",
    "ganga_like.detached",
    "ganga_like.hosts",
)
# The runner is the one plugin other plugins may import (Local runs its tasks through it,
# a Slurm pilot runs it inside an allocation), and only through its public modules: its
# client, its file protocol (which imports nothing of ours) and how its journals read as
# status reports.
RUNNER_PACKAGE = "ganga_like_runner"
RUNNER_PUBLIC = (
    "ganga_like_runner.client",
    "ganga_like_runner.protocol",
    "ganga_like_runner.journal_reports",
)
# The runner runs as its own process and must start whatever state the core is in: only
# its client side (which runs in the session process) may use ganga_like.
RUNNER_CLIENT_SIDE = {
    "ganga_like_runner.client",
    "ganga_like_runner.launch",
    "ganga_like_runner.journal_reports",
}
EXTENSION_HOOKS = {"load_ipython_extension", "unload_ipython_extension"}


@dataclass
class Module:
    name: str
    path: Path
    imports: set[str] = field(default_factory=set)  # our modules only
    external: set[str] = field(default_factory=set)  # top-level names of everything else


def _module_name(path: Path) -> str:
    rel = path.relative_to(PLUGINS if path.is_relative_to(PLUGINS) else ROOT)
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> Iterator[Path]:
    yield from sorted((ROOT / "ganga_like").rglob("*.py"))
    for package in sorted(PLUGINS.iterdir()):
        if (package / "__init__.py").exists():
            yield from sorted(package.rglob("*.py"))


def _import_nodes(tree: ast.Module, skip_hooks: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if skip_hooks and isinstance(node, ast.FunctionDef) and node.name in EXTENSION_HOOKS:
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


@cache
def graph() -> dict[str, Module]:
    modules = {_module_name(p): Module(_module_name(p), p) for p in _sources()}
    for module in modules.values():
        tree = ast.parse(module.path.read_text(), str(module.path))
        package = (
            module.name if module.path.name == "__init__.py" else module.name.rpartition(".")[0]
        )
        hooks = module.name == "ganga_like"
        for node in _import_nodes(tree, skip_hooks=hooks):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, *([base] if base else [])])
                for alias in node.names:
                    child = f"{base}.{alias.name}"
                    targets.append(child if child in modules else base)
            for target in targets:
                while target and target not in modules and "." in target:
                    target = target.rpartition(".")[0]  # an attribute of a module
                if target in modules:
                    if target != module.name:
                        module.imports.add(target)
                elif not node_is_relative(node):
                    module.external.add(target.partition(".")[0])
    return modules


def node_is_relative(node: ast.Import | ast.ImportFrom) -> bool:
    return isinstance(node, ast.ImportFrom) and node.level > 0


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def _layer(name: str) -> str | None:
    """The core layer of a ganga_like module; None for plugins."""
    parts = name.split(".")
    if parts[0] != "ganga_like":
        return None
    if len(parts) == 1:
        return "shell"  # the package's __init__: the names users import
    layer = CORE_LAYER.get(parts[1])
    assert layer is not None, f"{name}: no layer for ganga_like.{parts[1]}; add it to CORE_LAYER"
    return layer


def _edges() -> Iterator[tuple[str, str]]:
    for module in graph().values():
        for target in sorted(module.imports):
            yield module.name, target


def test_every_module_is_found() -> None:
    names = graph()
    assert "ganga_like.model.base" in names
    assert "ganga_like_runner.loop" in names
    assert "ganga_like.repository.storage" in names["ganga_like.repository.connection"].imports


def test_no_import_cycle_of_any_length() -> None:
    edges = {
        m.name: {t for t in m.imports if (m.name, t) not in ALLOWED_CYCLE_EDGES}
        for m in graph().values()
    }
    cycles = _cycles(edges)
    assert not cycles, "import cycles (each list: modules that import each other):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_the_cycle_finder_finds_long_cycles() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_nothing_imports_a_higher_layer() -> None:
    upward = []
    for source, target in _edges():
        low, high = _layer(source), _layer(target)
        if low is None or high is None or (source, target) in ALLOWED_UPWARD:
            continue
        if LAYERS[high] > LAYERS[low]:
            upward.append(f"{source} ({low}) imports {target} ({high})")
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_plugins_use_only_the_model_errors_private_and_batch_base() -> None:
    wrong = []
    for source, target in _edges():
        if _layer(source) is not None or _layer(target) is None:
            continue
        allowed = any(target == p or target.startswith(p + ".") for p in PLUGIN_MAY_IMPORT)
        if not allowed and (source, target) not in ALLOWED_UPWARD:
            wrong.append(f"{source} imports {target}")
    assert not wrong, "plugins reaching beyond the model interfaces:\n" + "\n".join(wrong)


def test_no_plugin_imports_another_but_the_runner_through_its_public_modules() -> None:
    wrong = []
    for source, target in _edges():
        if _layer(source) is not None or _layer(target) is not None:
            continue
        plugin, other = source.split(".")[0], target.split(".")[0]
        if plugin != other and target not in RUNNER_PUBLIC:
            wrong.append(f"{source} imports {target}")
    assert not wrong, "plugins importing other plugins:\n" + "\n".join(wrong)


def test_the_runners_public_modules_exist() -> None:
    names = graph()
    assert [m for m in RUNNER_PUBLIC if m not in names] == []
    # Local and the Slurm pilot both depend on the runner plugin, through those alone.
    users = {s.split(".")[0] for s, t in _edges() if t in RUNNER_PUBLIC}
    assert {"ganga_like_local", "ganga_like_slurm"} <= users


def test_the_core_never_imports_a_plugin() -> None:
    wrong = [f"{s} imports {t}" for s, t in _edges() if _layer(s) is not None and _layer(t) is None]
    assert not wrong, "\n".join(wrong)


def test_the_runner_process_never_imports_ganga_like() -> None:
    names = graph()
    runner_side = [
        n
        for n in names
        if (n == RUNNER_PACKAGE or n.startswith(RUNNER_PACKAGE + "."))
        and n not in RUNNER_CLIENT_SIDE
    ]
    assert f"{RUNNER_PACKAGE}.__main__" in runner_side
    # Everything the runner's entry point reaches, transitively.
    reached: set[str] = set()
    todo = [f"{RUNNER_PACKAGE}.__main__"]
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(names[name].imports)
    outside = sorted(n for n in reached if not n.startswith(RUNNER_PACKAGE))
    assert not outside, f"the runner process would import {outside}"
    into_core = sorted(
        f"{n} imports {t}"
        for n in runner_side
        for t in names[n].imports
        if t.split(".")[0] == "ganga_like"
    )
    assert not into_core, "\n".join(into_core)


def test_the_allow_lists_hold_only_imports_that_still_exist() -> None:
    edges = set(_edges())
    stale = sorted((ALLOWED_CYCLE_EDGES | ALLOWED_UPWARD) - edges)
    assert not stale, f"no longer imported, remove from the allow-lists: {stale}"


def _declared_distributions() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    # A plugin's own dependency may be an extra (``dask``), imported only when it is used;
    # ``dev`` is for the test tools, never imported by the code.
    extras = [
        spec
        for name, specs in project.get("optional-dependencies", {}).items()
        if name != "dev"
        for spec in specs
    ]
    specs = [*project["dependencies"], *extras]
    names = {re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0] for spec in specs}
    return {re.sub(r"[-_.]+", "-", n).lower() for n in names}


def test_every_third_party_import_is_a_declared_dependency() -> None:
    declared = _declared_distributions()
    providers = importlib.metadata.packages_distributions()
    undeclared = []
    for module in graph().values():
        for top in sorted(module.external):
            if top in sys.stdlib_module_names or top in ("ganga_like", "__future__"):
                continue
            dists = {re.sub(r"[-_.]+", "-", d).lower() for d in providers.get(top, [])}
            if not dists & declared:
                undeclared.append(f"{module.name} imports {top} ({sorted(dists) or 'unknown'})")
    assert not undeclared, "imported but not declared in pyproject:\n" + "\n".join(undeclared)


# -- no module-level mutable state in plugins --------------------------------------------
#
# What a plugin keeps from call to call lives in its backend's poller (what the monitor
# keeps between cycles) or in an object its process owns, never in a module global: a
# module global is shared by every session and monitor of the process and survives them.
# Constants are ALL_CAPS and frozen: tuples, frozensets, or annotated ``Final`` with a
# read-only type (``Final[Mapping[...]]``). ``__all__`` is the module's export list.

MUTABLE_CALLS = {"dict", "list", "set", "defaultdict", "OrderedDict", "Counter", "deque"}
MUTABLE_TYPES = MUTABLE_CALLS | {"Dict", "List", "Set", "DefaultDict", "MutableMapping"}
MUTABLE_TYPES |= {"MutableSequence", "MutableSet", "bytearray"}
MUTABLE_LITERALS = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)


def _called(node: ast.expr | None) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)


def _names_a_mutable_type(annotation: ast.expr | None) -> bool:
    """Whether an annotation is a mutable container (``dict[str, int]``, ``"set[str]"``,
    ``Final[list[str]]``, ``list[int] | None``); not a class that merely holds one."""
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    if isinstance(annotation, ast.BinOp):  # X | None
        return _names_a_mutable_type(annotation.left) or _names_a_mutable_type(annotation.right)
    head = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    name = head.id if isinstance(head, ast.Name) else getattr(head, "attr", None)
    if name in ("Final", "Optional") and isinstance(annotation, ast.Subscript):
        return _names_a_mutable_type(annotation.slice)
    return name in MUTABLE_TYPES


def _is_final(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    head = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    name = head.id if isinstance(head, ast.Name) else getattr(head, "attr", None)
    return name == "Final"


def _module_level(tree: ast.Module) -> Iterator[ast.stmt]:
    """The module's own statements, in ``if``/``try``/``with`` blocks too; not those of
    its functions and classes."""
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If | ast.Try | ast.With):
            for block in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, block, []):
                    stack.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])


def module_state(source: str) -> list[str]:
    """The module-level mutable state of a module's source, one line each: assignments
    of mutable values, or of names annotated as such, but ALL_CAPS frozen constants; and
    ``global`` statements (a function rebinding a module name)."""
    tree = ast.parse(source)
    found: list[tuple[int, str]] = []
    for node in _module_level(tree):
        if isinstance(node, ast.Assign):
            targets, value, annotation = node.targets, node.value, None
        elif isinstance(node, ast.AnnAssign):
            targets, value, annotation = [node.target], node.value, node.annotation
        else:
            continue
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if names == ["__all__"]:
            continue
        mutable = (
            isinstance(value, MUTABLE_LITERALS)
            or _called(value) in MUTABLE_CALLS
            or _names_a_mutable_type(annotation)
        )
        constant = all(n.lstrip("_").isupper() for n in names) and (
            isinstance(value, ast.Tuple)
            or _called(value) == "frozenset"
            or (_is_final(annotation) and not _names_a_mutable_type(annotation))
        )
        if mutable and not constant:
            found.append((node.lineno, ", ".join(names) or "?"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found.append((node.lineno, f"global {', '.join(node.names)}"))
    return [f"line {line}: {what}" for line, what in sorted(found)]


def _plugin_state() -> set[tuple[str, str]]:
    state: set[tuple[str, str]] = set()
    for module in graph().values():
        if module.path.is_relative_to(PLUGINS):
            for line in module_state(module.path.read_text()):
                state.add((module.name, line.partition(": ")[2]))
    return state


def test_no_plugin_keeps_mutable_state_in_a_module_global() -> None:
    broken = sorted(_plugin_state())
    assert not broken, "module-level mutable state in plugins: " + "; ".join(
        f"{module}: {what}" for module, what in broken
    )


def test_the_module_state_check_tells_constants_from_state() -> None:
    state = """
__all__ = ["a"]
TABLE = {"a": 1}
_CACHE: dict[str, int] = {}
seen = set()
COUNTS = Counter()
later: "list[int]" = []
NAMES = ("a", "b")
KINDS = frozenset({"a"})
STATES: Final[Mapping[str, int]] = {"a": 1}
BAD: Final[dict[str, int]] = {}
if True:
    hidden = []
def f():
    global seen
    local = {}
class C:
    attribute = {}
"""
    assert module_state(state) == [
        "line 3: TABLE",
        "line 4: _CACHE",
        "line 5: seen",
        "line 6: COUNTS",
        "line 7: later",
        "line 11: BAD",
        "line 13: hidden",
        "line 15: global seen",
    ]


# -- rooms sized to be read --------------------------------------------------------------

MODULE_LINES = 600
FUNCTION_LINES = 80  # from its ``def`` to its last line; a nested function on its own
# Functions allowed longer, by the package they are in (wherever inside it they move) and
# their name, each with why: none now. An entry that fits (or no longer exists) fails
# ``test_the_size_allow_list_holds_only_what_is_still_too_long``, so the list only shrinks.
LONG_FUNCTIONS: set[tuple[str, str]] = set()


def _trees() -> Iterator[tuple[Module, str, ast.Module]]:
    for module in graph().values():
        text = module.path.read_text()
        yield module, text, ast.parse(text, str(module.path))


def _long_functions() -> Iterator[tuple[Module, ast.FunctionDef | ast.AsyncFunctionDef, int]]:
    for module, _text, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > FUNCTION_LINES:
                    yield module, node, lines


def _allowed_long(module: Module, name: str) -> tuple[str, str] | None:
    for package, function in LONG_FUNCTIONS:
        if name == function and (module.name + ".").startswith(package + "."):
            return package, function
    return None


def test_no_module_is_longer_than_a_room() -> None:
    long = [
        f"{module.path.relative_to(ROOT)}: {len(text.splitlines())} lines"
        for module, text, _tree in _trees()
        if len(text.splitlines()) > MODULE_LINES
    ]
    assert not long, f"modules over {MODULE_LINES} lines (split them):\n" + "\n".join(long)


def test_no_function_is_longer_than_a_screenful_or_two() -> None:
    long = [
        f"{module.path.relative_to(ROOT)}:{node.lineno} {node.name}: {lines} lines"
        for module, node, lines in _long_functions()
        if _allowed_long(module, node.name) is None
    ]
    assert not long, f"functions over {FUNCTION_LINES} lines:\n" + "\n".join(long)


def test_the_size_allow_list_holds_only_what_is_still_too_long() -> None:
    still = {_allowed_long(module, node.name) for module, node, _lines in _long_functions()}
    stale = sorted(LONG_FUNCTIONS - still)
    assert not stale, f"no longer too long, remove from LONG_FUNCTIONS: {stale}"


# -- the model's state is the model's ---------------------------------------------------

_DICT_CHANGES = {"clear", "pop", "popitem", "setdefault", "update"}


def _dict_writes(tree: ast.Module) -> Iterator[int]:
    """Lines writing some object's ``__dict__``: an item assigned or deleted, or a call
    changing it (``obj.__dict__.update(...)``)."""

    def is_dict(node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "__dict__"

    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Subscript) and is_dict(t.value) for t in targets):
            yield node.lineno
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _DICT_CHANGES
            and is_dict(node.func.value)
        ):
            yield node.lineno


def test_only_the_model_writes_an_objects_dict() -> None:
    writes = [
        f"{module.path.relative_to(ROOT)}:{line}"
        for module, _text, tree in _trees()
        if not module.name.startswith("ganga_like.model.")
        for line in _dict_writes(tree)
    ]
    assert not writes, (
        "__dict__ written outside ganga_like/model/ (give the model a method):\n"
        + "\n".join(writes)
    )


def test_the_dict_write_finder_finds_every_kind_of_write() -> None:
    source = (
        "a.__dict__['x'] = 1\n"
        "del a.__dict__['x']\n"
        "a.__dict__.update(b)\n"
        "a.__dict__.pop('x', None)\n"
        "y = a.__dict__['x']\n"
        "z = dict(a.__dict__)\n"
    )
    assert list(_dict_writes(ast.parse(source))) == [1, 2, 3, 4]


# -- a module's name says which one it is ------------------------------------------------
#
# A traceback line, an editor tab or a search hit shows a module's last name, not its
# package: two modules of one name are told apart only by where they live. The few names
# below are shared on purpose, each by exactly the modules listed (a new module of such a
# name fails too, and so does one renamed since: the lists only shrink).

PLUGIN_ROLE = (
    "the part a plugin plays for the core, in each plugin that plays it: the package "
    "says which plugin, the name which part (entry points name backend and settings)"
)
LAYER_FACE = (
    "one thing as each layer holds it: the model's record, the runtime's work on it and "
    "the GPI's face of it, told apart by the layer as the import rules are"
)
SHARED_NAMES: dict[str, tuple[set[str], str]] = {
    "backend": (
        {
            "ganga_like.batch.backend",
            "ganga_like_dask.backend",
            "ganga_like_local.backend",
            "ganga_like_sge.backend",
            "ganga_like_slurm.backend",
        },
        PLUGIN_ROLE + "; the batch base's is the class each batch backend extends",
    ),
    "settings": (
        {
            "ganga_like.batch.settings",
            "ganga_like_dask.settings",
            "ganga_like_local.settings",
            "ganga_like_sge.settings",
            "ganga_like_slurm.settings",
            # What a session is opened with; renaming it touches every entry point.
            "ganga_like.runtime.settings",
        },
        PLUGIN_ROLE + "; the batch base's is the section each batch backend's extends",
    ),
    "scheduler": (
        {"ganga_like.batch.scheduler", "ganga_like_sge.scheduler", "ganga_like_slurm.scheduler"},
        PLUGIN_ROLE + "; the batch base's is the interface the two implement",
    ),
    "script": (
        {"ganga_like.batch.script", "ganga_like_sge.script"},
        PLUGIN_ROLE + "; the batch base writes the body of the script Grid Engine's heads",
    ),
    "states": ({"ganga_like_sge.states", "ganga_like_slurm.states"}, PLUGIN_ROLE),
    "job": ({"ganga_like.model.job", "ganga_like.gpi.job"}, LAYER_FACE),
    "waiting": ({"ganga_like.runtime.waiting", "ganga_like.gpi.waiting"}, LAYER_FACE),
    "callbacks": (
        {
            "ganga_like.model.callbacks",
            "ganga_like.runtime.workflow.callbacks",
            "ganga_like.gpi.callbacks",
        },
        LAYER_FACE,
    ),
    "iterate": ({"ganga_like.runtime.workflow.iterate", "ganga_like.gpi.iterate"}, LAYER_FACE),
    "stream": ({"ganga_like.model.stream", "ganga_like.runtime.workflow.stream"}, LAYER_FACE),
}


def _modules_by_name() -> dict[str, set[str]]:
    """Last name -> the modules of that name (a package's ``__init__`` is named by its
    package, and ``__main__`` is what ``python -m`` runs: neither is counted)."""
    found: dict[str, set[str]] = {}
    for module in graph().values():
        if module.path.name in ("__init__.py", "__main__.py"):
            continue
        found.setdefault(module.name.rpartition(".")[2], set()).add(module.name)
    return found


def test_no_two_modules_share_a_name_but_the_few_that_say_why() -> None:
    found = _modules_by_name()
    unexplained = []
    for name, modules in sorted(found.items()):
        allowed = SHARED_NAMES[name][0] if name in SHARED_NAMES else set()
        if len(modules) > 1 and not modules <= allowed:
            unexplained.append(f"{name}: {', '.join(sorted(modules))}")
    assert not unexplained, (
        "modules sharing a name: give each a name that says which one it is\n"
        + "\n".join(unexplained)
    )
    gone = {
        name: sorted(allowed - found.get(name, set()))
        for name, (allowed, _why) in SHARED_NAMES.items()
        if not allowed <= found.get(name, set())
    }
    assert not gone, f"renamed or removed since: drop from SHARED_NAMES: {gone}"
