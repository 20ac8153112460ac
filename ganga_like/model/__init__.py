"""The model layer: persistent objects and status rules. Pure: no threads, no processes."""
