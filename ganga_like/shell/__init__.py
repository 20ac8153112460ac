"""The shell layer: the ``ganga`` command, the IPython shell and the Jupyter extension.

Modules, one job each: ``app`` (the ``ganga`` Application), ``hooks`` (per-cell transactions,
one-line errors), ``magics``, ``display`` (rich and HTML tables and trees), ``progress``
(rich and notebook progress), ``toolbar`` (prompt and bottom toolbar), ``lexer`` (the
input line's colours, IPython's, with the cell-magic lexers made on use), ``collector``
(the garbage collector paused while ``ganga`` starts), ``terminal`` (whether output may be
coloured: not when piped, nor with NO_COLOR), ``extension`` (putting it together for a
shell or a kernel).

The settings these modules read (``Display``, ``Shell``) are sections of the configuration
layer, ``ganga_like.config``. Nothing below this layer imports it; this package's
``__init__`` stays empty so that importing one module does not pull in IPython.
"""
