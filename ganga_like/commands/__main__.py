"""``python -m ganga_like.commands SUBCOMMAND ...``: the same as ``ganga SUBCOMMAND ...``."""

import sys

from ganga_like.commands.dispatch import dispatch, quiet_closed_pipe

try:
    code = dispatch(sys.argv[1:])
    if code is None:
        print(f"unknown subcommand; try: {sys.argv[0]} jobs --help", file=sys.stderr)
        code = 2
    sys.stdout.flush()
except BrokenPipeError:
    code = quiet_closed_pipe()
sys.exit(code)
