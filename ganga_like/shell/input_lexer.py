"""The ganga shell's input lexer: IPython's, with what a plain Python line does not need made
on first use.

IPython colours the input line with Pygments lexers: Python, and Bash for ``!`` lines and
``%%bash`` cells, HTML, JavaScript, Perl, Ruby and LaTeX for those cell magics. It builds
all of them for every prompt, and the first build compiles each lexer's regular
expressions: about a tenth of IPython's start-up CPU, spent before the first prompt on
lexers most sessions never use. Here only the Python lexer is built at once; the others
(IPython's own lexer, whole) when a line first needs one. The colours are IPython's.
"""

from __future__ import annotations

from typing import Any

from IPython.terminal import interactiveshell, ptutils
from prompt_toolkit.lexers import PygmentsLexer

__all__ = ["LazyIPythonLexer", "use_lazy_lexer"]

_IPythonPTLexer = ptutils.IPythonPTLexer


class LazyIPythonLexer(_IPythonPTLexer):
    """``IPythonPTLexer`` whose lexers are built when a line first needs them.

    ``lex_document`` is IPython's: it picks ``python_lexer``, ``shell_lexer`` or one of
    ``magic_lexers`` by the start of the text. None is set at first: reading
    ``python_lexer`` builds the Python lexer alone, reading anything else builds IPython's
    own lexer and takes it from there.
    """

    def __init__(self) -> None:  # IPython's __init__ would build every lexer now
        self._whole: Any = None

    def __getattr__(self, name: str) -> Any:
        # Called only for what is not set yet.
        if name.startswith("__") or name == "_whole":
            raise AttributeError(name)
        if name == "python_lexer":
            import pygments.lexers

            # What IPythonPTLexer uses for Python (a test compares the two lexers).
            value: Any = PygmentsLexer(pygments.lexers.Python3Lexer)
        else:
            if self._whole is None:
                self._whole = _IPythonPTLexer()  # type: ignore[no-untyped-call]
            value = getattr(self._whole, name)
        setattr(self, name, value)
        return value


def use_lazy_lexer() -> bool:
    """Make the terminal shells IPython creates in this process use
    :class:`LazyIPythonLexer` (for the ``ganga`` command, before it starts IPython).
    False, and nothing changed, if this IPython does not build its lexer as expected."""
    if getattr(interactiveshell, "IPythonPTLexer", None) is not _IPythonPTLexer:
        return False
    setattr(interactiveshell, "IPythonPTLexer", LazyIPythonLexer)  # noqa: B010 - not exported
    return True
