"""Checks and repairs of a repository file.

``file_check``: the quick checks made before every opening, and the one-line error that
says the file is damaged; ``fullcheck`` (with ``pickles``): every transaction, record and
object; ``integrity``: ``ganga repository check`` and ``recover`` on a file, with
``repair`` putting back what recovery can; ``orphans``: a repository that lost its jobs,
refused when opened; ``reset``: moving their workspaces aside; ``exclusive``: taking a
repository for a repair that needs every session gone.
"""
