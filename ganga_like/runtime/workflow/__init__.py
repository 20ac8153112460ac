"""Workflows: jobs that wait for other jobs (``after=``), decided in the transaction that
records what they wait for and driven by whichever monitor holds the lease."""
