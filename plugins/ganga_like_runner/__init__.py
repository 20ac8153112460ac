"""The detached runner (``python -m ganga_like_runner RUNNER_DIR``) and its client side.

A plugin of its own: the Local backend runs its tasks through it on this machine, and a
Slurm pilot runs it inside an allocation.  What other plugins may use of it (the import
graph test holds them to it):

* ``client``: queue batches and kill requests, and keep one runner alive per directory;
* ``protocol``: the files the runner and its clients share (a pilot writes its batch and
  kill requests with these, its runner being on another machine);
* ``journal_reports``: the runner's event journals read as status reports.

Kept free of imports: the runner process imports this package first and must not import
``ganga_like``; only the client side (``client``, ``launch``, ``journal_reports``), which
runs in the session process, may.
"""
