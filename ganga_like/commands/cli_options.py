"""The options of ``ganga`` a subcommand accepts, told apart without the shell application.

``ganga jobs`` must not pay for building the traitlets application (and importing what it
stands on) only to learn that its command line holds none of ganga's options; the shell
application (:class:`ganga_like.shell.app.GangaApp`) uses these same names, and a test
keeps the two in step.
"""

from __future__ import annotations

__all__ = ["ALIASES", "FLAGS", "NOT_WITH_SUBCOMMAND", "ganga_options_among"]

# Options taking a value (``--gangadir DIR`` or ``--gangadir=DIR``).
ALIASES = ("gangadir", "mode", "repository", "config", "log-level")
# Options without one: traitlets' own three, then ganga's.
FLAGS = (
    "debug",
    "show-config",
    "show-config-json",
    "i",
    "generate-config",
    "no-monitor",
    "readonly",
)
# Options that choose what ganga does rather than how: not for a subcommand.
NOT_WITH_SUBCOMMAND = ("i", "generate-config", "show-config", "show-config-json")


def ganga_options_among(args: list[str]) -> tuple[list[str], list[str]]:
    """(ganga's options, the rest) among a subcommand's arguments: ``--gangadir``,
    ``--mode``, ``--repository``, ``--config``, ``--log-level``, ``--readonly``, ``--no-monitor``,
    ``--debug`` and ``--Section.option``, each with its value. No subcommand has an
    option of these names; everything after ``--`` is the subcommand's."""
    own: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            rest.extend(args[i:])
            break
        name = token[2:].split("=", 1)[0] if token.startswith("--") else ""
        # --Section.option, also in the wrong case (--local.x): the settings' own check
        # then names the section meant, rather than argparse an unrecognized argument.
        takes_value = name in ALIASES or ("." in name and name[:1].isalpha())
        if name and (takes_value or (name in FLAGS and name not in NOT_WITH_SUBCOMMAND)):
            own.append(token)
            if takes_value and "=" not in token and i + 1 < len(args):
                own.append(args[i + 1])
                i += 1
        else:
            rest.append(token)
        i += 1
    return own, rest
