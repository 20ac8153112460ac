"""The runtime layer: submission with rollback, the monitoring service, waiting."""
