"""The shell layer: the ``ganga`` command, configuration, the IPython shell and the Jupyter
extension.

Modules, one job each: ``config`` (settings as traitlets config sections, the GPI
``config`` object), ``app`` (the ``ganga`` Application), ``hooks`` (per-cell transactions,
one-line errors), ``magics``, ``display`` (rich and HTML tables and trees), ``progress``
(rich and notebook progress), ``toolbar`` (prompt and bottom toolbar), ``extension``
(putting it together for a shell or a kernel).

Nothing below this layer imports it; this package's ``__init__`` stays empty so that
importing ``ganga_like.shell.config`` does not pull in IPython.
"""
