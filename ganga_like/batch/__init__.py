"""The base of the batch backends (Slurm; PBS, HTCondor, LSF... to come).

What every batch system needs is here, once: the submit loop (arrays, ``keep_going``, a
scheduler that stops answering halts the rest), retries with doubling back-off, a
submission that is never sent twice (each job has a unique name, looked up after an
ambiguous failure), the workspace of each (sub)job, the scripts and the submission log
kept per top-level job, the cancelling of submissions a crash left unconfirmed, the
kill of elements or whole arrays, and the poll with its rules (one queue query and at
most one history query per cycle; a finished job waits for its exit code; a job listed
nowhere is concluded gone only after a grace) in a pure :class:`~.tracker.Tracker`.

A new batch backend plugs in with two classes (see ``ganga_like_slurm`` for a complete
one):

1. a :class:`~.scheduler.BatchScheduler`: the id forms (``valid_id``, ``split_id``,
   ``element_id``, ``elements_target``), and each command built and its output parsed,
   pure (``submit_command``/``parse_submit_output``, ``query_command``/``parse_query``,
   optionally ``history_command``/``parse_history``, ``cancel_command``,
   ``find_by_name_command``/``parse_found``, ``is_transient``): the base runs them, one
   call for many ids, and raises :class:`~.commands.CommandError` on failure. Parsed
   rows are :class:`~.tracker.Sighting` objects. Names in messages are class attributes;
2. a :class:`~.backend.BatchBackend` subclass (the GangaObject users configure): its
   schema with a protected ``id``, ``scheduler = YourScheduler()``, and the hooks
   ``batch_settings`` (waits and limits, see :class:`~.backend.BatchSettings`), ``plan``
   (usually :func:`~.planning.plan_batches` with the job's options and a queue choice),
   ``render`` (the batch script of a batch: the system's directives, then the bash body
   :mod:`.script` writes), and optionally ``before_submit``,
   ``record`` and ``read_failure``. What its poll keeps between monitor cycles (what
   was last reported, when the scheduler was last asked) it gets from the base's
   :class:`~.polling.BatchPoller`. Register it in the ``ganga_like.plugins`` entry points.

This package imports only the model, the errors and ``ganga_like.private``: never the
runtime, the shell, the GPI or the repository.
"""
