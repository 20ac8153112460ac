"""Putting the GPI into an IPython shell: the ``ganga`` terminal, or a notebook kernel after
``%load_ext ganga_like``.

Both get the GPI names, an open session with monitoring, one transaction per cell,
one-line GPI errors, the magics, HTML displays and completion that shows only public
names. A terminal also gets coloured tables, rich progress bars, the ganga prompt and the
bottom toolbar; a kernel gets live HTML progress.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
import weakref
from dataclasses import dataclass
from typing import Any

from traitlets.config import Configurable

from ganga_like.config.sections import Shell
from ganga_like.config.snapshot import ConfigSnapshot
from ganga_like.config.store import store
from ganga_like.errors import GangaError
from ganga_like.gpi.job import Job
from ganga_like.gpi.progress import Progress, ProgressFactory, set_progress_factory
from ganga_like.gpi.slices import JobSlice
from ganga_like.gpi.workflow_graph import WorkflowGraph
from ganga_like.model.times import JobTimes
from ganga_like.runtime.session import current_session, existing_session
from ganga_like.runtime.stats.data import JobStats
from ganga_like.shell import collector, toolbar
from ganga_like.shell.hooks import CellTransactions, show_gpi_error
from ganga_like.shell.magics import GangaMagics
from ganga_like.shell.user_script import core_namespace, plugin_namespace

__all__ = ["is_terminal", "load", "unload"]


class PluginLoader:
    """Puts the plugin classes (Executable, Local, ...) into the namespace.

    Importing them is most of the GPI's start-up cost, and nobody needs them before the
    first cell: in a terminal they are imported in a background thread once the first
    prompt is on the screen, and the first cell waits for them if it comes sooner.
    """

    def __init__(self, ip: Any) -> None:
        self.ip = ip
        self._thread: threading.Thread | None = None
        self._names: dict[str, Any] = {}
        self._pushed = False

    def start(self, *_: Any) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._import, name="ganga-plugins", daemon=True)
            self._thread.start()

    def _import(self) -> None:
        # A plugin that fails to import comes back as an Unavailable stand-in, never
        # as an exception: nothing can be lost here.
        self._names = plugin_namespace()

    def push(self, *_: Any) -> None:
        """Make sure the names are in the namespace (``pre_run_cell``; idempotent)."""
        if self._pushed:
            return
        self.start()
        assert self._thread is not None
        self._thread.join()
        user_ns = self.ip.user_ns
        # A -i script may have rebound a name: its value wins.
        self.ip.push({k: v for k, v in self._names.items() if k not in user_ns})
        self._pushed = True


@dataclass
class _Loaded:
    cells: CellTransactions
    previous_progress: ProgressFactory
    toolbar: toolbar.Toolbar | None
    plugins: PluginLoader
    listener: Any


_loaded: weakref.WeakKeyDictionary[Any, _Loaded] = weakref.WeakKeyDictionary()


def is_terminal(ip: Any) -> bool:
    """A terminal IPython (the ``ganga`` shell, ``ipython``), not a notebook kernel."""
    module = sys.modules.get("IPython.terminal.interactiveshell")
    return module is not None and isinstance(ip, module.TerminalInteractiveShell)


def load(ip: Any) -> None:
    """Set ``ip`` up for the GPI (a second call does nothing)."""
    if ip in _loaded:
        return
    try:
        _load(ip)
    except BaseException:
        collector.resume()  # no first prompt of ours to wait for
        raise


def _load(ip: Any) -> None:
    terminal = is_terminal(ip)
    ip.push(core_namespace())
    plugins = PluginLoader(ip)
    pt_app = getattr(ip, "pt_app", None)
    if terminal and pt_app is not None:
        # Before the cell hooks, so that a cell's transaction starts after the import.
        ip.events.register("pre_run_cell", plugins.push)
        pt_app.app.after_render += plugins.start
        # The ganga command paused the garbage collector for its start-up, which ends here.
        pt_app.app.after_render += collector.resume
    else:
        plugins.push()
        collector.resume()
    try:
        current_session().autocommit = False
    except GangaError as exc:
        # E.g. the repository is in use elsewhere: say why once; every GPI use will too.
        print(f"ERROR: {exc}", file=sys.stderr)
    cells = CellTransactions(ip)
    cells.register()
    # GPI errors and Ctrl-C show one line (``%tb`` still has the traceback).
    ip.set_custom_exc((GangaError, KeyboardInterrupt), show_gpi_error)
    ip.register_magics(GangaMagics)
    _register_displays(ip, terminal=terminal)
    _public_completion(ip)
    previous = set_progress_factory(_terminal_progress if terminal else _notebook_progress)
    bar = toolbar.install(ip) if terminal else None
    listener = None
    if terminal:
        ip.confirm_exit = store.value("Shell", "confirm_exit")
        listener = _shell_listener(ip)
        store.follow(listener)
    _loaded[ip] = _Loaded(cells, previous, bar, plugins, listener)


def unload(ip: Any) -> None:
    """Undo :func:`load`: changes are committed at once again, plain displays."""
    state = _loaded.pop(ip, None)
    if state is None:
        return
    state.cells.unregister()
    with contextlib.suppress(ValueError):
        ip.events.unregister("pre_run_cell", state.plugins.push)
    if state.listener is not None:
        store.unfollow(state.listener)
    ip.set_custom_exc((), None)
    from ganga_like.shell import display

    display.unregister(ip)
    set_progress_factory(state.previous_progress)
    if state.toolbar is not None and getattr(ip, "pt_app", None) is not None:
        ip.pt_app.bottom_toolbar = None
    session = existing_session()
    if session is not None:
        session.repo.commit()
        session.autocommit = True


# The display and progress modules (and rich) are imported on first use, not at start-up:
# the shell's first prompt should not wait for what the first table needs.


def _register_displays(ip: Any, *, terminal: bool) -> None:
    def call(name: str, module: str = "display") -> Any:
        def render(*args: Any) -> Any:
            return getattr(importlib.import_module(f"ganga_like.shell.{module}"), name)(*args)

        return render

    formatters = ip.display_formatter.formatters
    formatters["text/html"].for_type(JobSlice, call("slice_html"))
    formatters["text/html"].for_type(Job, call("job_html"))
    formatters["text/html"].for_type(JobTimes, call("times_html"))
    formatters["text/html"].for_type(WorkflowGraph, call("graph_html", "graph_display"))
    if terminal:
        plain = formatters["text/plain"]
        graph_text = call("graph_text", "graph_display")
        plain.for_type(WorkflowGraph, lambda obj, p, cycle: p.text(graph_text(obj)))
        slice_text, job_text = call("slice_text"), call("job_text")
        # IPython's pretty printer prefers a subclass's own __repr__ to a printer
        # registered for its base, so every slice class is registered.
        for cls in _subclasses(JobSlice):
            plain.for_type(cls, lambda obj, p, cycle: p.text(slice_text(obj)))
        plain.for_type(Job, lambda obj, p, cycle: p.text(job_text(obj)))
        plain.for_type(JobStats, lambda obj, p, cycle: p.text(_stats_text(obj)))


def _stats_text(stats: JobStats) -> str:
    from ganga_like.shell.stats_display import stats_text

    return stats_text(stats)


def _subclasses(cls: type) -> list[type]:
    found, pending = [], [cls]
    while pending:
        klass = pending.pop()
        found.append(klass)
        pending.extend(klass.__subclasses__())
    return found


def _terminal_progress(title: str, *, show: bool | None, delay: float) -> Progress:
    from ganga_like.shell.progress_display import terminal_factory

    return terminal_factory(title, show=show, delay=delay)


def _notebook_progress(title: str, *, show: bool | None, delay: float) -> Progress:
    from ganga_like.shell.progress_display import notebook_factory

    return notebook_factory(title, show=show, delay=delay)


def _public_completion(ip: Any) -> None:
    # Jedi completes nothing on GPI proxies (their attributes come from __getattr__ and
    # __dir__); IPython's own completer uses dir(), which lists public names only.
    ip.Completer.use_jedi = False
    # IPython evaluates ``j.application.`` before completing it only for types whose
    # __getattr__ it trusts; GPI attribute reads have no side effects, so trust them.
    try:
        from IPython.core.guarded_eval import EVALUATION_POLICIES
    except ImportError:  # pragma: no cover - older IPython: nothing to do
        return
    policy = EVALUATION_POLICIES.get("limited")
    external = getattr(policy, "allowed_getattr_external", None)
    if isinstance(external, set):
        external.add(("ganga_like.gpi.proxy", "GPIObject"))


def _shell_listener(ip: Any) -> Any:
    def changed(snapshot: ConfigSnapshot, section: type[Configurable], option: str) -> None:
        if section is not Shell:
            return
        value = getattr(snapshot[Shell], option)
        if option == "confirm_exit":
            ip.confirm_exit = value
        elif option == "toolbar_interval" and getattr(ip, "pt_app", None) is not None:
            ip.pt_app.refresh_interval = value

    return changed
