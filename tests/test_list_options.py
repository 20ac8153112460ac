"""List options written as text (``--Display.columns=fqid,status``) on the command line, in
the config file and at runtime alike; a bad value is refused in one line that shows how a
list is written there, before anything is opened or written."""

from __future__ import annotations

from pathlib import Path

import pytest
import traitlets
from hypothesis import given
from hypothesis import strategies as st

from ganga_like import config
from ganga_like.config.choices import COLUMNS
from ganga_like.config.lists import comma_separated, split_commas
from ganga_like.config.sections import Display
from ganga_like.errors import ConfigError

from .test_cli import ganga

SHOW_COLUMNS = "print(config.Display.columns)\n"
COLUMNS_LIST = ", ".join(COLUMNS)


@pytest.fixture
def show(tmp_path: Path) -> Path:
    script = tmp_path / "show.py"
    script.write_text(SHOW_COLUMNS)
    return script


@pytest.mark.parametrize(
    "args",
    [
        ["--Display.columns=fqid,status"],
        ["--Display.columns=fqid, status"],
        ["--Display.columns", "fqid,status"],
        ["--Display.columns=fqid", "--Display.columns=status"],  # traitlets' own form
        ["--Display.columns=fqid,", "--Display.columns", "status"],
    ],
)
def test_a_list_on_the_command_line_is_its_items_separated_by_commas(
    args: list[str], show: Path, env_for: dict[str, str]
) -> None:
    result = ganga([*args, str(show)], env_for)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "('fqid', 'status')"


def test_a_list_option_is_taken_by_a_subcommand_and_the_piped_shell(
    env_for: dict[str, str],
) -> None:
    listed = ganga(["jobs", "--Display.columns=fqid,status", "--json"], env_for)
    assert (listed.returncode, listed.stdout.strip()) == (0, "[]"), listed.stderr
    shell = ganga(["--Display.columns=name,fqid"], env_for, stdin=SHOW_COLUMNS)
    assert shell.returncode == 0, shell.stderr
    assert "('name', 'fqid')" in shell.stdout


@pytest.mark.parametrize(
    ("args", "wrong"),
    [
        (["jobs", "--Display.columns=fqid,bogus"], f"'bogus' is not one of {COLUMNS_LIST}"),
        (["--Display.columns=fqid status", "jobs"], f"'fqid status' is not one of {COLUMNS_LIST}"),
        (["--Display.columns=[fqid]"], f"'[fqid]' is not one of {COLUMNS_LIST}"),
        (["--Display.columns="], "needs at least 1 item"),
    ],
)
def test_a_bad_list_on_the_command_line_is_one_line_showing_how_to_write_one(
    args: list[str], wrong: str, env_for: dict[str, str], gangadir: Path
) -> None:
    result = ganga(args, env_for, stdin="Job()\n")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"ganga: command line: Display.columns: {wrong}; "
        "write a list as --Display.columns=fqid,status"
    ]
    assert result.stdout == ""
    assert not gangadir.exists()  # refused before the repository was opened


def test_a_dict_on_the_command_line_is_one_key_an_option(
    show: Path, env_for: dict[str, str], gangadir: Path
) -> None:
    hint = "write one --Display.status_colours=submitting=yellow per key"
    for arg, wrong in (
        ("running", "expected KEY=VALUE, not 'running'"),
        (
            "running=red,failed=blue",
            "'red,failed=blue' (for running) is not a colour name, color(N) or #rrggbb",
        ),
    ):
        bad = ganga([f"--Display.status_colours={arg}", "jobs"], env_for)
        assert bad.returncode == 2
        assert bad.stderr.splitlines() == [
            f"ganga: command line: Display.status_colours: {wrong}; {hint}"
        ]
    assert not gangadir.exists()
    script = show.with_name("colours.py")
    script.write_text("c = config.Display.status_colours\nprint(c['running'], c['failed'])\n")
    args = ["--Display.status_colours=running=red", "--Display.status_colours=failed=blue"]
    good = ganga([*args, str(script)], env_for)
    assert (good.returncode, good.stdout.strip()) == (0, "red blue"), good.stderr


def test_a_list_in_the_config_file_may_be_written_the_same_way(
    show: Path, env_for: dict[str, str], gangadir: Path
) -> None:
    path = Path(env_for["XDG_CONFIG_HOME"]) / "ganga_like" / "ganga_config.py"
    path.parent.mkdir(parents=True)
    path.write_text('c.Display.columns = "fqid status"\n')
    bad = ganga(["jobs"], env_for)
    assert bad.returncode == 2
    assert bad.stderr.splitlines() == [
        f"ganga: config file {path}: Display.columns: 'fqid status' is not one of "
        f"{COLUMNS_LIST}; write a list as c.Display.columns = ['fqid', 'status']"
    ]
    assert not gangadir.exists()
    for text in ('c.Display.columns = "fqid,status"', 'c.Display.columns = ["fqid", "status"]'):
        path.write_text(text + "\n")
        result = ganga([str(show)], env_for)
        assert (result.returncode, result.stdout.strip()) == (0, "('fqid', 'status')"), text
    # The command line wins over the file, as for any option.
    path.write_text('c.Display.columns = "fqid"\n')
    over = ganga(["--Display.columns=name,fqid", str(show)], env_for)
    assert (over.returncode, over.stdout.strip()) == (0, "('name', 'fqid')"), over.stderr


def test_a_list_set_at_runtime_may_be_written_the_same_way() -> None:
    config.Display.columns = "name, fqid"
    assert config.Display.columns == ("name", "fqid")
    config.Display.columns = ["status"]
    with pytest.raises(ConfigError) as err:
        config.Display.columns = "fqid;status"
    assert str(err.value) == (
        f"Display.columns: 'fqid;status' is not one of {COLUMNS_LIST}; "
        "write a list as config.Display.columns = ['fqid', 'status']"
    )
    with pytest.raises(ConfigError, match=r"^Display.columns: expected a list, not the int 3; "):
        config.Display.columns = 3
    assert config.Display.columns == ("status",)  # refused values change nothing


def test_help_all_shows_the_comma_separated_form(env_for: dict[str, str]) -> None:
    help_all = ganga(["--help-all"], env_for).stdout
    assert "--Display.columns=<item>,<item>,...\n" in help_all
    assert "--Display.status_colours=<key-1>=<value-1>...\n" in help_all


@given(
    st.lists(st.sampled_from(COLUMNS), min_size=1),
    st.lists(st.sampled_from(["", " ", "  "]), min_size=2, max_size=2),
    st.integers(min_value=1, max_value=3),
)
def test_splitting_at_commas_gives_back_the_items_however_they_are_spread(
    items: list[str], blanks: list[str], pieces: int
) -> None:
    """The items joined by commas (with blanks around them), given whole or cut into
    several texts (several options on the command line), split back into the items."""
    trait = Display.class_traits()["columns"]
    joined = ",".join(f"{blanks[0]}{item}{blanks[1]}" for item in items)
    cut = [",".join(items[i : i + pieces]) for i in range(0, len(items), pieces)]
    assert split_commas(trait, joined) == items
    assert split_commas(trait, cut) == items
    assert split_commas(trait, list(items)) == items


def test_only_lists_whose_items_cannot_hold_a_comma_are_split() -> None:
    assert comma_separated(traitlets.List(traitlets.Enum(["a", "b"])))
    assert comma_separated(traitlets.List(traitlets.Int()))
    assert split_commas(traitlets.List(traitlets.Float()), "1, 2.5") == [1.0, 2.5]
    for trait in (
        traitlets.List(traitlets.Unicode()),  # "--exclude=node1,node2" is one item
        traitlets.List(),
        traitlets.List(traitlets.Enum(["a,b", "c"])),
        traitlets.Dict(),
        traitlets.Unicode(),
    ):
        assert not comma_separated(trait)
        assert split_commas(trait, "x,y") == "x,y"
