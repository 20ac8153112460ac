"""Shared mode: one ZEO server per repository, and the sessions' client side of it.

``shared`` finds the repository's server and starts it when missing; ``server`` is that
server (``python -m ganga_like.repository.zeo.server``); ``client_storage`` is the
sessions' ZEO ClientStorage, and ``client_cache`` its persistent cache made to survive a
full disk.  The features the client and server agree on are in ``client_storage``.
"""
