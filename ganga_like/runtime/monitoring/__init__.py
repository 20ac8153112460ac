"""Monitoring: one thread polls each backend in bulk and commits the status changes (the
pure status engine decides them); one process per gangadir holds the lease to poll; the
daemon keeps polling after every session has exited."""
