"""``ganga web``: the jobs and each job's stats, plots and subjob grid in a browser.

Opt-in and local: the server listens on the loopback interface only and answers only
requests that carry the random token of the URL it prints (``access``). The pages are
static files that read JSON from the server (``routes``); the server reads the repository
in one thread of its own (``reader``), and tells open pages when something was committed
(Server-Sent Events), so they show a job as it progresses. Needs the ``web`` extra
(Starlette and uvicorn); nothing here is imported unless ``ganga web`` runs.
"""
