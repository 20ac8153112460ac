"""Configuration: defaults < config file < environment < command line < runtime ``config``."""

from __future__ import annotations

import string
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from traitlets.config import Config

from ganga_like import config
from ganga_like.config.sections import Monitor
from ganga_like.config.store import all_sections, config_dir, options, store
from ganga_like.errors import ConfigError
from ganga_like.runtime.session import Session, current_session
from ganga_like.runtime.settings import configured_settings
from ganga_like.shell.app import GangaApp
from ganga_like_local.backend import Local as LocalBackend
from ganga_like_local.settings import Local


def write_config(text: str) -> Path:
    path = config_dir() / "ganga_config.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    store.reset()
    return path


def test_defaults_without_a_config_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GANGA_DIR", raising=False)
    monkeypatch.delenv("GANGA_REPOSITORY_MODE", raising=False)
    assert not config_dir().exists()
    settings = configured_settings()
    assert settings.gangadir == Path.home() / "gangadir"
    assert settings.repository_mode == "shared"  # sessions share a gangadir unasked
    assert (settings.monitor_min_interval, settings.monitor_max_interval) == (0.05, 2.0)
    assert settings.monitoring is True
    assert config.Display.columns == ("fqid", "status", "name", "subjobs", "application", "backend")


def test_each_layer_beats_the_one_before(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GANGA_DIR", raising=False)
    write_config(
        f"c.Repository.gangadir = {str(tmp_path / 'from-file')!r}\n"
        "c.Monitor.max_interval = 7.0\n"
        "c.Monitor.min_interval = 0.5\n"
        "c.Local.max_concurrent = 3\n"
        "c.Display.max_rows = 10\n"
    )
    s = configured_settings()
    assert (s.gangadir, s.monitor_max_interval) == (tmp_path / "from-file", 7.0)
    assert store.snapshot()[Local].max_concurrent == 3

    monkeypatch.setenv("GANGA_DIR", str(tmp_path / "from-env"))
    assert configured_settings().gangadir == tmp_path / "from-env"

    app = GangaApp()
    app.initialize(
        [
            f"--gangadir={tmp_path / 'from-cli'}",
            "--Monitor.max_interval=9",
            "--Local.max_concurrent",
            "4",
        ]
    )
    s = configured_settings()
    assert (s.gangadir, s.monitor_max_interval) == (tmp_path / "from-cli", 9.0)
    assert store.snapshot()[Local].max_concurrent == 4
    assert s.monitor_min_interval == 0.5  # only in the file: still there
    assert config.Display.max_rows == 10

    config.Monitor.max_interval = 11
    config.Local.max_concurrent = 5
    s = configured_settings()
    assert (s.monitor_max_interval, store.snapshot()[Local].max_concurrent) == (11.0, 5)


def test_runtime_changes_reach_the_open_session(session: Session) -> None:
    config.Monitor.max_interval = 4.5
    config.Local.max_concurrent = 7
    assert session.settings.monitor_max_interval == 4.5
    assert session.monitor.config[Monitor].max_interval == 4.5
    assert session.submit_context(LocalBackend).config[Local].max_concurrent == 7
    assert session.monitor.running
    config.Monitor.enabled = False
    assert not session.monitor.running
    config.Monitor.enabled = True
    assert session.monitor.running


@pytest.mark.parametrize(
    ("section", "option", "value", "message"),
    [
        (
            "Monitor",
            "max_interval",
            -1,
            "Monitor.max_interval: expected a float (at least 0.001), got -1",
        ),
        ("Monitor", "max_interval", "soon", "Monitor.max_interval: expected a float"),
        (
            "Monitor",
            "min_interval",
            10.0,
            "Monitor.min_interval (10.0) is larger than Monitor.max_interval (2.0)",
        ),
        (
            "Monitor",
            "max_intervl",
            3,
            "Monitor has no option 'max_intervl'; did you mean 'max_interval'?",
        ),
        ("Monitr", "max_interval", 3, "no configuration section 'Monitr'; did you mean 'Monitor'?"),
        (
            "Local",
            "max_concurrent",
            0,
            "Local.max_concurrent: expected an int (at least 1, at most",
        ),
        (
            "Local",
            "max_concurrent",
            True,
            "Local.max_concurrent: expected an int (at least 1, at most 2147483647), got True "
            "(not a number)",
        ),
        (
            "Local",
            "max_concurrent",
            10**30,
            "Local.max_concurrent: expected an int (at least 1, at most 2147483647), got "
            + "1"
            + "0" * 30,
        ),
        ("Dask", "timeout", float("nan"), "Dask.timeout: expected a float (at least 0.1), got nan"),
        (
            "Monitor",
            "max_interval",
            float("inf"),
            "Monitor.max_interval: expected a float (at least 0.001), got inf",
        ),
        ("Display", "columns", ["fqid", "colour"], "Display.columns:"),
        ("Display", "status_colours", {"failed": "reddish"}, "'reddish' (for failed) is not a"),
        ("Display", "status_colours", {"broken": "red"}, "unknown status 'broken'"),
        ("Repository", "mode", "cloud", "Repository.mode: expected any of"),
    ],
)
def test_bad_values_are_refused_and_change_nothing(
    section: str, option: str, value: object, message: str
) -> None:
    before = configured_settings()
    with pytest.raises(ConfigError) as err:
        setattr(getattr(config, section), option, value)
    assert message in str(err.value)
    assert "\n" not in str(err.value)
    assert configured_settings() == before


def test_repository_options_are_fixed_while_it_is_open(session: Session, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot change while the repository is open"):
        config.Repository.gangadir = str(tmp_path / "elsewhere")
    assert session.repo.gangadir == (tmp_path / "gangadir").resolve()


def test_repository_options_apply_to_the_session_opened_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ganga_like.runtime.session import close_session

    monkeypatch.setenv("GANGA_DIR", str(tmp_path / "env"))
    config.Repository.gangadir = str(tmp_path / "chosen")
    try:
        assert current_session().repo.gangadir == (tmp_path / "chosen").resolve()
    finally:
        close_session()


def test_config_file_errors_name_the_file() -> None:
    path = write_config("c.Monitor.max_intervl = 3\n")
    with pytest.raises(ConfigError) as err:
        configured_settings()
    assert str(path) in str(err.value) and "did you mean 'max_interval'" in str(err.value)
    write_config("c.Monitor.max_interval = 'x'\n")
    with pytest.raises(ConfigError, match=r"Monitor\.max_interval: expected a float"):
        configured_settings()
    write_config("c.Monitor.max_interval = (\n")
    with pytest.raises(ConfigError, match="SyntaxError"):
        configured_settings()


@pytest.mark.parametrize(
    ("suffix", "text"),
    [(".json", '{"Repository": ""}'), (".json", '{"Monitor": [1]}'), (".py", "c.Local = 3\n")],
)
def test_a_section_given_a_value_instead_of_options_is_one_line_for_every_command(
    env_for: dict[str, str], suffix: str, text: str
) -> None:
    path = (Path(env_for["XDG_CONFIG_HOME"]) / "ganga_like" / "ganga_config").with_suffix(suffix)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    name = "Repository" if "Repository" in text else "Monitor" if "Monitor" in text else "Local"
    script = path.parent.parent / "script.py"
    script.write_text("print(len(jobs))\n")
    for args in (["jobs"], [str(script)]):
        result = ganga(args, env_for)
        assert result.returncode != 0, result.stdout
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        # traitlets refuses a Python file's own way, naming the section too
        assert str(path) in lines[0] and (
            f"{name} is a section and holds options" in lines[0] or f"{name!r}, 3" in lines[0]
        )
    path.unlink()
    assert ganga(["jobs"], env_for).returncode == 0


def test_xdg_config_home_is_respected_and_a_relative_one_ignored(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config_dir() == tmp_path / "xdg" / "ganga_like"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/dir")
    assert config_dir() == Path.home() / ".config" / "ganga_like"


def test_runtime_config_lists_every_option_and_completes_names() -> None:
    text = repr(config)
    for cls in all_sections():
        assert f"[{cls.__name__}]" in text
        for option, trait in options(cls).items():
            assert f"  {option} = " in text and trait.help.split(".")[0] in text
    assert dir(config) == sorted(cls.__name__ for cls in all_sections())
    assert dir(config.Monitor) == sorted(options(all_sections()[1]))
    with pytest.raises(ConfigError, match="set an option"):
        config.Monitor = 3  # type: ignore[misc]


def test_every_option_that_feeds_settings_names_a_real_field() -> None:
    import dataclasses

    from ganga_like.runtime.settings import SETTINGS_FIELDS, Settings

    assert set(SETTINGS_FIELDS.values()) <= {f.name for f in dataclasses.fields(Settings)}


def test_every_setting_has_help_text() -> None:
    for cls in all_sections():
        for option, trait in options(cls).items():
            assert trait.help, f"{cls.__name__}.{option} has no help"
            assert trait.metadata.get("config") is True


def ganga(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ganga_like.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_generate_config_then_help_all_and_precedence_in_a_real_process(
    tmp_path: Path, env_for: dict[str, str]
) -> None:
    generated = ganga(["--generate-config"], env_for)
    assert generated.returncode == 0, generated.stderr
    path = Path(env_for["XDG_CONFIG_HOME"]) / "ganga_like" / "ganga_config.py"
    text = path.read_text()
    for cls in all_sections():
        for option in options(cls):
            assert f"# c.{cls.__name__}.{option} = " in text
    again = ganga(["--generate-config"], env_for)
    assert again.returncode == 1 and "already exists" in again.stderr

    help_all = ganga(["--help-all"], env_for).stdout
    for cls in all_sections():
        for option in options(cls):
            assert f"--{cls.__name__}.{option}=" in help_all

    # The file sets three values, the environment overrides one, the command line another.
    path.write_text(
        text + "\nc.Monitor.max_interval = 6.0\nc.Local.idle_exit = 12.0\n"
        "c.Local.max_concurrent = 3\n"
    )
    script = tmp_path / "show.py"
    script.write_text(
        "from ganga_like.runtime.session import current_session\n"
        "from ganga_like_local.settings import Local as LocalSection\n"
        "s = current_session().settings\n"
        "local = current_session().config[LocalSection]\n"
        "print(s.gangadir, s.monitor_max_interval, local.idle_exit, local.max_concurrent)\n"
        "config.Local.idle_exit = 1.5\n"
        "print(current_session().config[LocalSection].idle_exit)\n"
    )
    result = ganga(["--Local.max_concurrent=5", str(script)], env_for)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [env_for["GANGA_DIR"], "6.0", "12.0", "5", "1.5"]

    bad = ganga(["--Monitor.max_interval=-2", str(script)], env_for)
    assert bad.returncode == 2
    assert bad.stderr.strip() == (
        "ganga: command line: Monitor.max_interval: expected a float (at least 0.001), got -2.0"
    )


def test_options_after_the_script_belong_to_the_script(
    tmp_path: Path, env_for: dict[str, str]
) -> None:
    script = tmp_path / "args.py"
    script.write_text("import sys\nprint(sys.argv[1:])\n")
    result = ganga(["--Monitor.enabled=False", str(script), "--help", "-i", "--x.y=1"], env_for)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['--help', '-i', '--x.y=1']"


def test_command_line_layer_can_also_be_given_directly() -> None:
    cli = Config()
    cli.Monitor.max_interval = 3.0
    store.use_command_line(cli)
    assert configured_settings().monitor_max_interval == 3.0


def test_the_shell_documentation_lists_every_setting() -> None:
    from .conftest import ROOT

    text = (ROOT / "docs" / "shell.md").read_text()
    for cls in all_sections():
        assert f"#### `{cls.__name__}`" in text
        section = text.split(f"#### `{cls.__name__}`", 1)[1].split("####", 1)[0]
        for option in options(cls):
            assert f"| `{option}` |" in section, f"{cls.__name__}.{option} undocumented"


def test_a_mistyped_section_in_the_config_file_is_named_in_one_line(
    env_for: dict[str, str],
) -> None:
    path = Path(env_for["XDG_CONFIG_HOME"]) / "ganga_like" / "ganga_config.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    # A typo of Monitor and one of IPython's InteractiveShell; IPython's own sections
    # (one of them close to Display) are not.
    path.write_text(
        "c.Monitr.max_interval = 5\n"
        "c.TerminalInteractiveShell.confirm_exit = False\n"
        "c.DisplayFormatter.active_types = ['text/plain']\n"
        "c.InteractiveShel.colors = 'nocolor'\n"
    )
    result = ganga(["jobs"], env_for)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"ganga: config file {path}: no configuration section 'Monitr'; did you mean "
        "'Monitor'? (its settings are ignored)",
        f"ganga: config file {path}: no configuration section 'InteractiveShel'; did you "
        "mean 'InteractiveShell'? (its settings are ignored)",
    ]


def test_a_section_written_in_the_wrong_case_is_named_in_one_line(
    env_for: dict[str, str],
) -> None:
    path = Path(env_for["XDG_CONFIG_HOME"]) / "ganga_like" / "ganga_config.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    # Python accepts c.local.x = 1 without a word (a lower-case name is no section to
    # traitlets), so the setting would be lost in silence.
    path.write_text("c.local.max_concurrent = 3\nc.MONITOR.max_interval = 5\n")
    result = ganga(["jobs"], env_for)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"ganga: config file {path}: no configuration section {wrong!r}; did you mean "
        f"{meant!r}? (its settings are ignored)"
        for wrong, meant in [("local", "Local"), ("MONITOR", "Monitor")]
    ]
    for args in (["--LOCAL.max_concurrent=2", "jobs"], ["jobs", "--local.max_concurrent=2"]):
        on_command_line = ganga(args, env_for)
        assert on_command_line.returncode == 2
        wrong = args[0 if args[0] != "jobs" else 1][2:].split(".")[0]
        assert f"no configuration section {wrong!r}; did you mean 'Local'?" in (
            on_command_line.stderr
        ), on_command_line.stderr


def test_a_section_or_option_named_by_something_not_a_string_is_one_line(
    session: Session,
) -> None:
    with pytest.raises(ConfigError) as section:
        config[3]
    assert str(section.value) == (
        "a configuration section is named by a string (e.g. 'Local'), not 3"
    )
    with pytest.raises(ConfigError) as option:
        config.Local[3]
    assert str(option.value) == "Local: an option is named by a string, not 3"


_SECTION_NAMES_FOR_PROPERTY = {
    "Monitor",
    "Local",
    "InteractiveShell",
    "TerminalInteractiveShell",
    "HistoryManager",
    "DisplayFormatter",
    "LoggingMagics",
}


def test_the_ipython_sections_known_without_ipython_are_sections_ipython_configures() -> None:
    from ganga_like.config.mistyped import IPYTHON_SECTIONS, configurable_names

    assert IPYTHON_SECTIONS.issubset(configurable_names())


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(sorted(_SECTION_NAMES_FOR_PROPERTY)),
            st.sampled_from(sorted(_SECTION_NAMES_FOR_PROPERTY)).map(lambda s: s[:-1]),
            st.text(alphabet=string.ascii_letters, min_size=1, max_size=12),
        ),
        max_size=6,
    )
)
def test_sections_known_without_ipython_give_the_typos_the_full_lookup_gives(
    names: list[str],
) -> None:
    """The shortcut (IPython's common sections known without loading IPython) answers as
    the full lookup of every configurable class does."""
    from ganga_like.config import mistyped

    ours = [cls.__name__ for cls in all_sections()]
    others = mistyped.configurable_names()
    full = {}
    for name in names:
        if name in ours or name in others:
            continue
        match = mistyped.closest_section(name, [*sorted(others), *ours])
        if match:
            full[name] = match
    assert mistyped.mistyped_sections(names, ours) == full


def test_a_config_file_with_ipythons_usual_sections_does_not_load_ipython_for_a_command(
    env_for: dict[str, str],
) -> None:
    path = Path(env_for["XDG_CONFIG_HOME"]) / "ganga_like" / "ganga_config.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "c.TerminalInteractiveShell.confirm_exit = False\nc.HistoryManager.enabled = False\n"
    )
    # The real command, then whether it imported IPython (at exit, whatever path it took).
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('IPython' in sys.modules, file=sys.stderr))\n"
        "from ganga_like.cli import main\n"
        "sys.argv = ['ganga', 'jobs']\n"
        "sys.exit(main())\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], env=env_for, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == ["False"]
