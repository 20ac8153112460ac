"""The GPI: the proxies users touch, the ``jobs`` registry and slices."""
