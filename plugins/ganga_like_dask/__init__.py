"""The Dask backend: subjobs run on the workers of a ``distributed`` cluster.

Importing this package imports no ``dask``: the backend connects (or starts a LocalCluster)
only when a job uses it.
"""
