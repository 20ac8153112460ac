"""The backend conformance suite (the Local backend's cases) and the sessions tests, run
again with the repository in PostgreSQL: the same tests, each with a database of its own
(``GANGA_REPOSITORY``, which every session and child process of the test opens).

Skipped without ``$GANGA_TEST_POSTGRES`` (``eval "$(bash scripts/start-postgres.sh)"``;
.ci/run starts one). The other backends' cases would only repeat, at their cost, what
the Local ones show of the repository; ``conftest.py`` leaves them out here.
"""

from __future__ import annotations

import pytest

from .test_backend_conformance import (  # noqa: F401 - collected here again
    backend_session,
    case,
    gated,
    test_a_failing_program_fails_with_its_exit_code_and_a_resubmission_completes,
    test_a_monitor_stopped_mid_run_and_restarted_loses_and_repeats_nothing,
    test_a_python_function_job_returns_each_value_and_a_raising_call_fails,
    test_a_split_job_completes_every_subjob_and_then_its_master,
    test_failed_subjobs_resubmitted_alone_or_through_their_master_complete,
    test_jobs_submitted_by_a_process_that_exited_complete_under_the_next_one,
    test_kill_9_of_the_submitter_after_the_hand_over_runs_each_subjob_exactly_once,
    test_killing_one_running_subjob_kills_only_that_one,
    test_killing_the_master_kills_every_subjob,
    test_one_job_completes_with_its_stdout_in_the_output_dir,
)
from .test_sessions import (  # noqa: F401 - collected here again
    env,
    test_a_shell_a_script_a_notebook_and_commands_share_a_gangadir_shell_first,
    test_the_same_sessions_started_the_other_way_round,
)

ONLY_CASE = "Local"


@pytest.fixture(autouse=True)
def _on_postgres(postgres_repository: str) -> str:
    return postgres_repository
