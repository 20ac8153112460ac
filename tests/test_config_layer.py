"""Configuration as its own layer: light to import, plugin sections declared by their
plugins, handed to backends as typed objects, given to subcommands explicitly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ganga_like import config
from ganga_like.commands.dispatch import dispatch
from ganga_like.config.snapshot import ConfigSnapshot
from ganga_like.config.store import all_sections, config_dir, store
from ganga_like.errors import ConfigError
from ganga_like.model.interfaces import PollContext, SubmitContext
from ganga_like.runtime.session import Session, close_session, open_session
from ganga_like.runtime.settings import Settings, configured_settings
from ganga_like_local.settings import Local as LocalSection
from ganga_like_slurm.backend import Slurm as SlurmBackend
from ganga_like_slurm.settings import Slurm as SlurmSection

ABOVE_THE_MODEL = (
    "ZODB",
    "ZEO",
    "ganga_like.repository",
    "ganga_like.runtime",
    "ganga_like.shell",
    "ganga_like.gpi",
    "IPython",
)


@pytest.mark.parametrize("module", ["ganga_like.model.status", "ganga_like.config", "ganga_like"])
def test_importing_the_model_or_the_configuration_loads_nothing_above_it(module: str) -> None:
    probe = (
        f"import sys, {module}\n"
        f"print([m for m in sys.modules if m.startswith({ABOVE_THE_MODEL!r})])"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert found.stdout.strip() == "[]"


def test_the_gpi_names_resolve_on_first_use_and_star_import_gives_them_all() -> None:
    probe = (
        "import sys, ganga_like\n"
        "assert 'ganga_like.gpi.job' not in sys.modules\n"
        "ns = {}\n"
        "exec('from ganga_like import *', ns)\n"
        "import ganga_like.gpi.job as gj, ganga_like.gpi.jobs_registry as gr\n"
        "import ganga_like.config as gc\n"
        "assert ns['Job'] is gj.Job and ns['jobs'] is gr.jobs and ns['config'] is gc\n"
        "assert all(n in ns for n in ganga_like.__all__)\n"
        "print(sorted(n for n in ('Local', 'Slurm', 'Executable') if n in ns))"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "['Executable', 'Local', 'Slurm']"


def test_plugins_declare_their_own_sections() -> None:
    names = [cls.__name__ for cls in all_sections()]
    assert names == [
        "Repository",
        "Monitor",
        "Dask",
        "Local",
        "Notifier",
        "SGE",
        "Slurm",
        "Jobs",
        "Display",
        "Shell",
    ]
    assert all_sections()[3] is LocalSection and all_sections()[6] is SlurmSection
    assert "Slurm" in dir(config)
    assert config.Slurm.poll_interval == SlurmSection().poll_interval


def test_the_slurm_section_is_read_from_the_config_file() -> None:
    path = config_dir() / "ganga_config.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("c.Slurm.poll_interval = 7.5\nc.Slurm.max_array_size = 100\n")
    store.reset()
    section = store.snapshot()[SlurmSection]
    assert (section.poll_interval, section.max_array_size) == (7.5, 100)
    path.write_text("c.Slurm.poll_intervl = 1\n")
    store.reset()
    with pytest.raises(ConfigError, match="did you mean 'poll_interval'"):
        configured_settings()


def test_a_batch_backend_section_takes_the_options_it_inherits_from_the_batch_base() -> None:
    from ganga_like_sge.settings import SGE as SGESection

    path = config_dir() / "ganga_config.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("c.SGE.poll_interval = 7.5\nc.SGE.max_array_size = 100\n")
    store.reset()
    section = store.snapshot()[SGESection]
    assert (section.poll_interval, section.max_array_size) == (7.5, 100)
    assert section.vanish_cycles == SGESection().vanish_cycles
    path.write_text("c.SGE.poll_intervl = 1\n")
    store.reset()
    with pytest.raises(ConfigError, match="did you mean 'poll_interval'"):
        configured_settings()


def test_a_runtime_slurm_change_reaches_the_backends_of_the_open_session(session: Session) -> None:
    config.Slurm.poll_interval = 1
    config.Local.max_concurrent = 3
    ctx = session.submit_context(SlurmBackend)
    assert ctx.config[SlurmSection].poll_interval == 1.0
    assert session.config[LocalSection].max_concurrent == 3
    with pytest.raises(ConfigError, match=r"Slurm\.vanish_cycles: expected an int \(at least"):
        config.Slurm.vanish_cycles = 0
    assert session.config[SlurmSection].vanish_cycles == SlurmSection().vanish_cycles


def test_a_backend_gets_its_section_typed_from_a_hand_built_context(tmp_path: Path) -> None:
    poll = PollContext(
        tmp_path, tmp_path / "w", ConfigSnapshot.of({SlurmSection: {"vanish_cycles": 1}})
    )
    section = poll.config[SlurmSection]
    assert (section.vanish_cycles, section.poll_interval) == (1, 5.0)
    submit = SubmitContext(tmp_path, tmp_path / "w", ConfigSnapshot.of({LocalSection: {}}))
    assert submit.config[LocalSection].max_concurrent == (os.cpu_count() or 1)
    with pytest.raises(ConfigError, match=r"Local\.max_concurrent"):
        ConfigSnapshot.of({LocalSection: {"max_concurrent": 0}})


def test_settings_hold_the_core_options_alone() -> None:
    with pytest.raises(TypeError, match="local_max_concurrent"):
        Settings(local_max_concurrent=2)  # type: ignore[call-arg]
    assert not hasattr(Settings(), "local_idle_exit")


def test_a_subcommand_uses_the_settings_it_is_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    given = tmp_path / "given"
    open_session(Settings(gangadir=given, repository_mode="embedded", monitoring=False))
    from ganga_like.gpi.job import Job

    Job(name="in-given")
    close_session()
    capsys.readouterr()
    code = dispatch(
        ["jobs", "--json"],
        settings=lambda: Settings(gangadir=given, repository_mode="embedded", monitoring=False),
    )
    assert code == 0
    assert [row["name"] for row in json.loads(capsys.readouterr().out)] == ["in-given"]


def test_a_section_that_fails_to_import_is_reported_and_start_up_goes_on(
    tmp_path: Path, env_for: dict[str, str]
) -> None:
    plugdir = tmp_path / "plug"
    info = plugdir / "broken_settings-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-settings\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[ganga_like.config]\nBroken = no_such_module_here:Broken\n"
        "Renamed = ganga_like_local.settings:Local\n"
    )
    env = dict(env_for, PYTHONPATH=f"{plugdir}{os.pathsep}{env_for['PYTHONPATH']}")

    help_all = subprocess.run(
        [sys.executable, "-m", "ganga_like.cli", "--help-all"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert help_all.returncode == 0, help_all.stderr
    assert "--Slurm.poll_interval=" in help_all.stdout
    assert "--Local.max_concurrent=" in help_all.stdout
    problems = help_all.stderr.strip().splitlines()
    assert len(problems) == 2, problems
    assert "Broken" in problems[0] and "no_such_module_here" in problems[0]
    assert "Renamed" in problems[1] and "named 'Local'" in problems[1]

    script = (
        "from ganga_like import *\n"
        "print('Broken' in repr(config), config.Slurm.poll_interval)\n"
        "config.Broken.x = 1\n"
    )
    used = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert used.returncode == 1
    assert used.stdout.split() == ["True", "5.0"]
    assert (
        used.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "ERROR: configuration section 'Broken' could not be loaded: no_such_module_here"
        )
    )


def test_the_configurations_closed_sets_match_the_layers_that_use_them() -> None:
    from ganga_like.config.choices import DEFAULT_STATUS_COLOURS
    from ganga_like.model.status import Status

    assert set(DEFAULT_STATUS_COLOURS) == {s.label for s in Status}


def test_the_slurm_section_loads_without_the_slurm_commands() -> None:
    from ganga_like_slurm import slurm_commands

    assert SlurmSection().command_timeout == slurm_commands.DEFAULT_TIMEOUT
    probe = (
        "import sys, ganga_like_slurm.settings\n"
        "print([m for m in sys.modules if m.startswith('ganga_like_slurm.')])"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert found.stdout.strip() == "['ganga_like_slurm.settings']"


_GROUPS = ("ganga_like.plugins", "ganga_like.config", "console_scripts", "other.group")
_entry = st.tuples(
    st.sampled_from(_GROUPS),
    st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,8}", fullmatch=True),
    st.from_regex(r"[a-z][a-z_]{0,8}:[A-Z][a-z]{0,5}", fullmatch=True),
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    dists=st.lists(st.lists(_entry, max_size=6), min_size=1, max_size=4),
    shadowed=st.booleans(),
)
def test_one_reading_of_the_entry_points_selects_each_group_as_importlib_does(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    dists: list[list[tuple[str, str, str]]],
    shadowed: bool,
) -> None:
    # Random distributions (one of them, if ``shadowed``, installed twice under one name:
    # only the first on the path counts) on the path: the shared reading must give each
    # group exactly what importlib.metadata.entry_points(group=...) gives.
    import importlib.metadata
    import uuid

    from ganga_like.config import installed

    root = tmp_path / uuid.uuid4().hex
    for i, entries in enumerate(dists):
        name = "shadow" if shadowed and i < 2 else f"rand{i}"
        place = root / f"p{i}"
        info = place / f"{name}-1.{i}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.{i}\n")
        sections: dict[str, list[str]] = {}
        for group, ep_name, value in entries:
            sections.setdefault(group, []).append(f"{ep_name} = {value}")
        (info / "entry_points.txt").write_text(
            "".join(f"[{g}]\n" + "\n".join(lines) + "\n" for g, lines in sections.items())
        )
        monkeypatch.syspath_prepend(str(place))
    installed.reset()
    try:
        for group in _GROUPS:
            assert list(installed.entry_points(group)) == list(
                importlib.metadata.entry_points(group=group)
            )
    finally:
        monkeypatch.undo()
        installed.reset()
