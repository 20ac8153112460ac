"""The ``ganga`` command, a ``traitlets.config.Application``.

    ganga                          the interactive shell (IPython with the GPI loaded)
    ganga script.py [args ...]     run the script, exit with its status
    ganga -i script.py [args ...]  run the script, then stay interactive
    ganga --Monitor.max_interval=5 --gangadir=/data/gangadir ...
    ganga --generate-config | --help | --help-all | --version

Everything after the script's name belongs to the script, so ``ganga s.py --help`` passes
``--help`` to ``s.py``. Options before it are ganga's; unknown ones are refused (status 2)
rather than silently ignored.
"""

from __future__ import annotations

import difflib
import logging
import platform
import sys
from pathlib import Path
from typing import Any

from traitlets import Bool, List, Unicode, default
from traitlets.config import Application, Config, Configurable

import ganga_like
from ganga_like.commands.cli_options import NOT_WITH_SUBCOMMAND, ganga_options_among
from ganga_like.config.lists import help_text
from ganga_like.config.store import (
    all_sections,
    default_config_file,
    store,
    unknown_option,
    unknown_section,
)
from ganga_like.errors import ConfigError, GangaError
from ganga_like.runtime.session import Session, close_session, current_session
from ganga_like.runtime.settings import configured_settings
from ganga_like.shell import collector
from ganga_like.shell.terminal import shell_colours
from ganga_like.shell.user_script import core_namespace, run_script

__all__ = ["GangaApp", "UsageFailure", "main"]

USAGE = """usage: ganga [options] [-i] [script.py [args ...]]
       ganga [options] SUBCOMMAND [args ...]   (jobs, show, kill, ...: listed below)
       ganga --generate-config | --help | --help-all | --version

Runs script.py with the GPI names (Job, jobs, config, Executable, ArgSplitter, Local, ...)
loaded and sys.argv set to [script.py, args...], and exits with the script's status.
Without a script, starts the interactive ganga shell (IPython) with the same names; -i runs
the script first. Options come before the script; everything after it is the script's.
A subcommand takes the options that are settings (--gangadir, --readonly, --mode,
--config, --no-monitor, --Section.option=value) before or after its name.

The repository is in $GANGA_DIR (default ~/gangadir). Settings: defaults < config file
($XDG_CONFIG_HOME/ganga_like/ganga_config.py) < environment < --Section.option=value.
"""

EXAMPLES = """
ganga                                      the shell
ganga scan.py 100                          run a script, sys.argv == ['scan.py', '100']
ganga -i scan.py                           run it, then stay in the shell
ganga --gangadir=/data/gangadir            another repository
ganga --Repository.mode=readonly           look at jobs while another ganga runs
ganga --Monitor.max_interval=10 --no-monitor
ganga --gangadir=/data/gangadir jobs       a subcommand on another repository
ganga --generate-config                    write a commented config file to edit
"""


class UsageFailure(Exception):
    """A command line ganga cannot use; the message is printed, the status is 2."""


class GangaApp(Application):
    """The ganga command."""

    name = Unicode("ganga")
    version = Unicode(ganga_like.__version__)
    description = Unicode(USAGE)
    examples = Unicode(EXAMPLES)
    classes: List[Any] = List()

    @default("classes")
    def _every_section(self) -> list[type[Configurable]]:
        # The core sections and those the installed plugins declare.
        return [*all_sections()]

    interactive = Bool(
        False,
        help="Run the script, then stay in the interactive shell (-i).",
    ).tag(config=True)
    generate_config = Bool(
        False,
        help="Write a commented config file with every option and its default, then exit.",
    ).tag(config=True)
    config_file = Unicode(
        "",
        help="The config file to read instead of $XDG_CONFIG_HOME/ganga_like/ganga_config.py.",
    ).tag(config=True)

    aliases = {  # noqa: RUF012 - traitlets declares these as plain class attributes
        "gangadir": "Repository.gangadir",
        "mode": "Repository.mode",
        "repository": "Repository.url",
        "config": "GangaApp.config_file",
        "log-level": "Application.log_level",
    }
    flags = {  # noqa: RUF012
        **Application.flags,
        "i": (
            {"GangaApp": {"interactive": True}},
            "Run the script, then stay in the interactive shell.",
        ),
        "generate-config": (
            {"GangaApp": {"generate_config": True}},
            "Write a commented config file, then exit.",
        ),
        "no-monitor": (
            {"Monitor": {"enabled": False}},
            "Do not start the monitoring thread (%monitor on starts it).",
        ),
        "readonly": (
            {"Repository": {"mode": "readonly"}},
            "Open the repository read-only (beside another ganga).",
        ),
    }

    # Options that choose what ganga does rather than how: not for a subcommand.
    NOT_WITH_SUBCOMMAND = NOT_WITH_SUBCOMMAND

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.script_argv: list[str] = []
        # ``ganga [options] SUBCOMMAND [args]``: the subcommand and its arguments.
        self.subcommand: list[str] = []
        self.exit_status = 0

    # -- command line ----------------------------------------------------------------

    def initialize(self, argv: list[str] | None = None) -> None:
        args = list(sys.argv[1:] if argv is None else argv)
        own, self.script_argv = self._split(args)
        from ganga_like.commands.dispatch import SUBCOMMANDS

        explicit_script = len(own) < len(args) and args[len(own)] == "--"
        if self.script_argv and self.script_argv[0] in SUBCOMMANDS and not explicit_script:
            # The options of ganga apply to the subcommand too, before or after it.
            later, rest = self.options_among(self.script_argv[1:])
            self.subcommand = [self.script_argv[0], *rest]
            self.script_argv = []
            own = [*own, *later]
            for token in own:
                name = token.lstrip("-").split("=", 1)[0]
                if token.startswith("-") and name in self.NOT_WITH_SUBCOMMAND:
                    raise UsageFailure(
                        f"{token} cannot be used with the subcommand {self.subcommand[0]!r}"
                    )
        self._check(own)
        self.parse_command_line(own)
        config_file = Path(self.config_file).expanduser() if self.config_file else None
        store.reset()
        store.use_command_line(self.cli_config, config_file)
        merged = store.merged()
        self.update_config(merged)  # this app's own options may come from the file too
        store.sections()  # validate everything now: a bad option is a usage error

    def _split(self, args: list[str]) -> tuple[list[str], list[str]]:
        """(ganga's options, [script, its args...])."""
        own: list[str] = []
        i = 0
        while i < len(args):
            token = args[i]
            if token == "--":
                return own, args[i + 1 :]
            if not token.startswith("-") or token == "-":
                return own, args[i:]
            own.append(token)
            name = token.lstrip("-")
            if "=" not in name and (name in self.aliases or "." in name) and i + 1 < len(args):
                own.append(args[i + 1])
                i += 1
            i += 1
        return own, []

    def options_among(self, args: list[str]) -> tuple[list[str], list[str]]:
        """(ganga's options, the rest) among a subcommand's arguments (see
        :func:`ganga_like.commands.cli_options.ganga_options_among`, which tells them apart
        without this application)."""
        return ganga_options_among(args)

    def _check(self, own: list[str]) -> None:
        builtin = {"h", "help", "help-all", "V", "version"}
        sections = all_sections()
        candidates: list[type[Configurable]] = [*sections, GangaApp, Application]
        known_classes = {cls.__name__: cls for cls in candidates}
        skip = False
        for token in own:
            if skip:
                skip = False
                continue
            name = token.lstrip("-").split("=", 1)[0]
            if name in builtin or name in self.flags or name in self.aliases:
                skip = name in self.aliases and "=" not in token
                continue
            section, _, option = name.partition(".")
            cls = known_classes.get(section)
            if option and cls is not None:
                if option in cls.class_traits(config=True):
                    skip = "=" not in token
                    continue
                detail = (
                    unknown_option(section, option)
                    if cls in sections
                    else f"{section} has no option {option!r}"
                )
                raise UsageFailure(f"unknown option {token.split('=', 1)[0]} ({detail})")
            if option:  # --Locl.max_concurrent: a section that is not one
                detail = unknown_section(section)
                raise UsageFailure(f"unknown option {token.split('=', 1)[0]}: {detail}")
            close = difflib.get_close_matches(name, [*builtin, *self.flags, *self.aliases], n=1)
            hint = f" (did you mean --{close[0]}?)" if close else ""
            raise UsageFailure(f"unknown option {token.split('=', 1)[0]}{hint}")
        if skip:  # the last option takes a value, and none follows
            raise UsageFailure(f"option {own[-1]} needs a value: {own[-1]}=VALUE")

    def emit_description(self) -> Any:
        yield USAGE

    def emit_help(self, classes: bool = False) -> Any:
        """``--help``: usage and options; ``--help-all``: every ganga setting too. (The
        logging options every traitlets application has, such as
        ``--Application.log_level``, still work but are not listed.)"""
        yield from self.emit_description()
        yield from emit_subcommands()
        yield from self.emit_options_help()
        if classes:
            yield (
                "Settings (--Section.option=value, or c.Section.option = value in the config file)"
            )
            yield "=" * 78
            yield ""
            for cls in all_sections():
                yield help_text(cls)
                yield ""
        yield from self.emit_examples()
        yield from self.emit_help_epilogue(classes)

    def print_version(self) -> None:
        print(f"ganga_like {ganga_like.__version__}")

    # -- running ---------------------------------------------------------------------

    def start(self) -> None:
        self.exit_status = self.run()

    def run(self) -> int:
        """Do what the command line asked; the exit status."""
        if self.subcommand:
            from ganga_like.commands.dispatch import dispatch

            collector.resume()  # paused for the shell's start-up: no shell

            # The subcommand's settings: this command line over the file and environment.
            return dispatch(self.subcommand, settings=lambda: configured_settings(store)) or 0
        if self.show_config or self.show_config_json:
            self.start_show_config()  # what the file, environment and command line set
            return 0
        if self.generate_config:
            return self._write_config()
        _configure_logging()
        status = 0
        names: dict[str, Any] = {}
        if self.script_argv:
            collector.resume()  # the script runs as it would anywhere
            status, names = run_script(self.script_argv[0], self.script_argv[1:])
            if not self.interactive:
                return status
        return launch_shell(names) or status

    def _write_config(self) -> int:
        path = Path(self.config_file).expanduser() if self.config_file else default_config_file()
        if path.exists():
            print(
                f"ganga: {path} already exists; move it away to write a fresh one", file=sys.stderr
            )
            return 1
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.generate_config_file(classes=list(all_sections())))
        print(f"wrote {path}")
        return 0


def emit_subcommands() -> Any:
    """The subcommands, one line each, for ``--help``."""
    from ganga_like.commands.dispatch import EPILOG, SUBCOMMANDS

    yield "Subcommands (ganga SUBCOMMAND --help explains one; they start no shell)"
    yield "-" * 70
    for name, (summary, _build) in SUBCOMMANDS.items():
        yield f"  ganga {name:<11} {summary}"
    yield f"  {EPILOG}"
    yield ""


# -- the interactive shell ------------------------------------------------------------


def launch_shell(names: dict[str, Any]) -> int:
    """IPython with the GPI (``names`` from a ``-i`` script on top); returns at exit."""
    try:
        session = current_session()
    except GangaError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    session.autocommit = False
    namespace = core_namespace()  # plugin classes follow once the prompt is up
    namespace.update({k: v for k, v in names.items() if not k.startswith("__")})
    from IPython import start_ipython

    from ganga_like.shell.input_lexer import use_lazy_lexer

    use_lazy_lexer()  # the lexers of cell magics only once one is typed
    shell = store.section("Shell")
    argv = ["--ext=ganga_like"]  # on the command line so a user's IPython config keeps it
    if not shell.banner:
        argv.append("--no-banner")
    start_ipython(
        argv=argv,
        user_ns=namespace,  # type: ignore[no-untyped-call]
        config=ipython_config(banner(session) if shell.banner else ""),
    )
    return 0


def ipython_config(banner_text: str) -> Config:
    """IPython's configuration for the ganga shell.

    Sections of the ganga config file that are not ganga's (``TerminalInteractiveShell``,
    ``InteractiveShell``, ...) are passed on to IPython, on top of ganga's choices.
    """
    from ganga_like.shell.toolbar import GangaPrompts

    shell = store.section("Shell")
    c = Config()
    c.TerminalInteractiveShell.banner1 = banner_text + "\n"
    c.TerminalInteractiveShell.banner2 = ""
    c.TerminalInteractiveShell.confirm_exit = shell.confirm_exit
    c.TerminalInteractiveShell.prompts_class = GangaPrompts
    c.TerminalInteractiveShell.term_title_format = "ganga: {cwd}"
    c.Completer.use_jedi = False
    if not shell_colours():  # input or output piped, or NO_COLOR: no escape codes
        c.InteractiveShell.colors = "NoColor"
    ours = {cls.__name__ for cls in all_sections()} | {"GangaApp", "Application"}
    merged = store.merged()
    for section in merged:
        if section not in ours and section[:1].isupper():
            c[section].merge(merged[section])
    return c


def banner(session: Session) -> str:
    from ganga_like.shell.toolbar import count_jobs, summary

    counts = count_jobs(session.registry())
    monitor = "on" if session.monitor.running else "off"
    python = platform.python_version()
    import IPython

    lines = [
        f"ganga_like {ganga_like.__version__} · IPython {IPython.__version__} · Python {python}",
        f"gangadir {session.repo.gangadir} ({session.repo.kind}) · jobs: {counts.total}"
        + (f" ({summary(counts.jobs)})" if counts.total else "")
        + f" · monitor {monitor}",
        "Job? shows every attribute · %jobs, %monitor status · config shows the settings · "
        "exit leaves jobs running",
    ]
    if getattr(session, "recovered", None):
        lines.append(f"recovered interrupted submissions: {', '.join(session.recovered)}")
    return "\n".join(lines)


def _configure_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    logger = logging.getLogger("ganga_like")
    if not logger.handlers:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


# -- entry point ----------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    finally:
        collector.resume()  # if ganga paused it and nothing resumed it yet (an error)


def _main(argv: list[str] | None) -> int:
    app = GangaApp()
    try:
        app.initialize(argv)
        status = app.run()
    except UsageFailure as exc:
        # One line, where to look next included: the usage is --help's to show.
        print(f"ganga: {exc}; ganga --help lists the options", file=sys.stderr)
        return 2
    except ConfigError as exc:
        print(f"ganga: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help, --version, traitlets' own argument errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    return _finish(status)


def _finish(status: int) -> int:
    try:
        close_session()
    except GangaError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
    return status
