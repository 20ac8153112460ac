"""The repository layer: opening ZODB, the job registry, transactions, workspaces."""
