"""The core configuration sections: every setting is a ``config=True`` trait of one section.

=============  ==============================  ==========================================
section        options                         feeds
=============  ==============================  ==========================================
Repository     gangadir, mode, server_...      Settings.gangadir, Settings.repository_mode,
                                               Settings.zeo_*, Settings.pack_*
Monitor        enabled, min_interval,          Settings.monitoring,
               max_interval, lease_timeout     Settings.monitor_*
Jobs           master_status_order             Settings.master_status_order
Display        columns, colours, ...           the shell's and notebook's tables
Shell          banner, prompt, toolbar, ...    the interactive shell
=============  ==============================  ==========================================

Plugins add their own sections (``Local``, ``Slurm``) through the ``ganga_like.config``
entry-point group (:mod:`ganga_like.config.plugins`). The defaults declared here are the
runtime defaults too: ``runtime.settings.Settings`` reads them, so the two never drift apart.
"""

from __future__ import annotations

from typing import Any

from traitlets import Bool, Dict, Enum, Float, Int, List, TraitError, Unicode, validate
from traitlets.config import Configurable

from ganga_like.config.choices import (
    COLUMNS,
    DEFAULT_STATUS_COLOURS,
    MASTER_STATUS_ORDERS,
    MODES,
)

__all__ = [
    "AFTER_PLUGINS",
    "BEFORE_PLUGINS",
    "Display",
    "Jobs",
    "Monitor",
    "Repository",
    "Shell",
    "default",
]


class Repository(Configurable):
    """Where jobs are stored and how the repository is opened (fixed while it is open)."""

    gangadir = Unicode(
        "~/gangadir",
        help="Directory of the job repository and the job workspaces. Environment: GANGA_DIR.",
    ).tag(config=True, runtime=False)
    mode = Enum(
        MODES,
        default_value="shared",
        help="How the repository is opened; the default needs no choosing: 'shared' (any "
        "number of shells, scripts, notebooks and the monitor daemon at once, through "
        "the repository's own server, started on demand; 'auto' is the same), "
        "'embedded' (this process alone, a little faster; another one gets a clear "
        "error) or 'readonly' (a snapshot, allowed beside the others). Environment: "
        "GANGA_REPOSITORY_MODE.",
    ).tag(config=True, runtime=False)
    url = Unicode(
        "",
        help="Where the jobs are stored: empty for <gangadir>/repository/Data.fs (the "
        "default), or postgresql://user@host:port/dbname for a PostgreSQL database that "
        "sessions on several hosts share (the workspaces stay in the gangadir, which those "
        "hosts must share too). Password: in ~/.pgpass or PGPASSWORD rather than here. "
        "Environment: GANGA_REPOSITORY; command line: --repository.",
    ).tag(config=True, runtime=False)
    server_address = Unicode(
        "",
        help="Where the shared-mode server listens: empty for a private Unix socket in "
        "the gangadir, or HOST:PORT for TCP.",
    ).tag(config=True, runtime=False)
    server_idle_exit = Float(
        60.0,
        min=0.0,
        help="Seconds the shared-mode server stays up with no session.",
    ).tag(config=True, runtime=False)
    client_cache_mb = Float(
        100.0,
        min=0.0,
        help="Size in MB of each session's persistent client cache in shared mode.",
    ).tag(config=True, runtime=False)
    pack_threshold_mb = Float(
        256.0,
        min=0.0,
        help="Pack the repository when it is opened, once its file is this large (MB) and "
        "has grown by half since the last pack; 0: never.",
    ).tag(config=True, runtime=False)
    pack_keep_days = Float(
        7.0,
        min=0.0,
        help="Days of history a pack keeps.",
    ).tag(config=True, runtime=False)


class Monitor(Configurable):
    """The monitoring thread that keeps job statuses current."""

    enabled = Bool(
        True,
        help="Run the monitoring thread (at runtime: starts or stops it).",
    ).tag(config=True)
    min_interval = Float(
        0.05,
        min=0.001,
        help="Seconds between polls while statuses are changing (less, down to 0.01, when "
        "the jobs still followed are expected to end sooner).",
    ).tag(config=True)
    max_interval = Float(
        2.0,
        min=0.001,
        help="Longest wait, in seconds, between polls when nothing changes (the wait "
        "doubles from min_interval up to this).",
    ).tag(config=True)
    lease_timeout = Float(
        2.0,
        min=0.01,
        help="Longest, in seconds, a monitor lease left by a session that died stays "
        "untaken before another session's monitor takes over.",
    ).tag(config=True)


class Jobs(Configurable):
    """How jobs behave."""

    master_status_order = Enum(
        MASTER_STATUS_ORDERS,
        default_value="running_first",
        help="How a split job's status follows its subjobs while some wait and others run: "
        "'running_first' (any running or completing subjob makes the master running, "
        "else any submitted one makes it submitted) or 'submitted_first' (the splitting "
        "design's order: any submitting or submitted subjob keeps the master submitted "
        "until the last one starts). Set it for every session alike (config file): "
        "the status index is written by whichever session sees the change.",
    ).tag(config=True, runtime=False)


def _is_colour(text: str) -> bool:
    # rich is imported only when someone actually sets colours.
    from rich.color import Color, ColorParseError

    try:
        Color.parse(text)
    except ColorParseError:
        return False
    return True


class Display(Configurable):
    """Job tables, job trees and progress in the shell and in notebooks."""

    columns = List(
        Enum(COLUMNS),
        default_value=list(COLUMNS),
        minlen=1,
        help=(
            "Columns of the shell's and notebooks' job tables (`ganga jobs` and "
            f"`print(jobs)` show them all), in order; any of: {', '.join(COLUMNS)}."
        ),
    ).tag(config=True)
    colours = Bool(
        True,
        help="Colour statuses in tables, job trees and the toolbar.",
    ).tag(config=True)
    status_colours = Dict(
        value_trait=Unicode(),
        default_value=dict(DEFAULT_STATUS_COLOURS),
        help="Colour of each status: a colour name (green, bright_blue, ...), color(N) or "
        "#rrggbb. Statuses left out keep their default colour.",
    ).tag(config=True)
    max_rows = Int(
        100,
        min=4,
        help="Longest table shown in full; a longer one shows its first and last rows.",
    ).tag(config=True)

    @validate("status_colours")
    def _check_colours(self, proposal: Any) -> dict[str, str]:
        value: dict[str, str] = proposal["value"]
        labels = set(DEFAULT_STATUS_COLOURS)
        for key, colour in value.items():
            if key not in labels:
                raise TraitError(
                    f"unknown status {key!r}; expected one of {', '.join(sorted(labels))}"
                )
            if not _is_colour(colour):
                raise TraitError(
                    f"{colour!r} (for {key}) is not a colour name, color(N) or #rrggbb"
                )
        return {**DEFAULT_STATUS_COLOURS, **value}


class Shell(Configurable):
    """The interactive ``ganga`` shell."""

    banner = Bool(
        True,
        help="Show the banner (version, gangadir, jobs by status) at start.",
    ).tag(config=True)
    prompt = Unicode(
        "ganga",
        help="The word in the input prompt: 'ganga [3]: '.",
    ).tag(config=True)
    confirm_exit = Bool(
        False,
        help="Ask before leaving on Ctrl-D. Jobs keep running after exit either way.",
    ).tag(config=True)
    toolbar = Bool(
        True,
        help="A bottom toolbar with live job counts by status and the monitor state.",
    ).tag(config=True)
    toolbar_interval = Float(
        1.0,
        min=0.1,
        help="Seconds between toolbar refreshes while the prompt waits.",
    ).tag(config=True)
    progress = Bool(
        True,
        help="Show the progress of long operations (submitting a split job, wait(), "
        "bulk actions on slices): bars on a terminal, a live display in "
        "notebooks.",
    ).tag(config=True)


# The order ``ganga --help-all``, ``--generate-config`` and ``config`` show the sections in:
# where and how jobs are stored and followed, then the plugins' sections (where jobs run),
# then how jobs behave and look.
BEFORE_PLUGINS: tuple[type[Configurable], ...] = (Repository, Monitor)
AFTER_PLUGINS: tuple[type[Configurable], ...] = (Jobs, Display, Shell)


def default(section: type[Configurable], option: str) -> Any:
    """The default of ``section.option``, as declared (a fresh copy of a list or dict)."""
    value = section.class_traits()[option].default()
    return value
