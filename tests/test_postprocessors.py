"""Postprocessors end to end: real Local jobs, the monitor running them at completion."""

from __future__ import annotations

import contextlib
import gzip
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ganga_like import (
    ArgSplitter,
    CustomChecker,
    CustomMerger,
    Executable,
    FileChecker,
    Job,
    LocalFile,
    MetaDataChecker,
    Retry,
    SchemaError,
    TextMerger,
    jobs,
)
from ganga_like.errors import GangaError, JobError
from ganga_like.runtime.session import Session, close_session, current_session, open_session
from ganga_like.runtime.settings import Settings
from ganga_like_local.backend import runner_dir
from ganga_like_runner import client as runner_client

from .waiting import wait_until


def program(tmp_path: Path) -> str:
    """Prints "line <arg>", and writes its metadata (``n`` = the argument)."""
    path = tmp_path / "prog.sh"
    path.write_text(
        textwrap.dedent("""\
            #!/bin/sh
            echo "line $1"
            echo "{\\"n\\": $1, \\"ok\\": true}" > __metadata__.json
            echo "part $1" > result.txt
        """)
    )
    path.chmod(0o755)
    return str(path)


def split_job(tmp_path: Path, postprocessors: list[object], count: int = 3) -> Job:
    return Job(
        application=Executable(exe=program(tmp_path)),
        splitter=ArgSplitter(args=[[str(i)] for i in range(1, count + 1)]),
        outputfiles=[LocalFile("__metadata__.json"), LocalFile("result.txt")],
        postprocessors=postprocessors,
    )


def causes(j: Job) -> list[str]:
    return [entry.cause for entry in j.history]


# -- mergers ----------------------------------------------------------------------------


def test_text_merger_concatenates_each_file_in_subjob_order_headed_by_the_subjob(
    session: Session, tmp_path: Path
) -> None:
    j = split_job(tmp_path, [TextMerger(files=["stdout", "*.txt"])])
    j.submit()
    assert j.wait(timeout=60) == "completed"
    merged = (j.outputdir / "stdout").read_text()
    assert merged == "".join(
        f"# ==> subjob {j.id}.{i}: stdout <==\nline {i + 1}\n" for i in range(3)
    )
    parts = (j.outputdir / "result.txt").read_text().splitlines()
    assert parts[1::2] == ["part 1", "part 2", "part 3"]


def test_text_merger_refuses_to_replace_an_existing_file_unless_overwrite(
    session: Session, tmp_path: Path
) -> None:
    j = split_job(tmp_path, [TextMerger(files=["stdout"])])
    j.outputdir.mkdir(parents=True, exist_ok=True)
    (j.outputdir / "stdout").write_text("mine\n")
    j.submit()
    assert j.wait(timeout=60) == "failed"
    assert (j.outputdir / "stdout").read_text() == "mine\n"  # nothing lost
    assert "overwrite=True" in causes(j)[-1] and "TextMerger" in causes(j)[-1]
    assert [sj.status for sj in j.subjobs] == ["completed"] * 3
    j.postprocessors = [TextMerger(files=["stdout"], overwrite=True)]
    assert j.runPostProcessors() is True
    assert j.status == "completed"
    assert (j.outputdir / "stdout").read_text().startswith(f"# ==> subjob {j.id}.0")


def test_a_file_missing_in_a_subjob_fails_the_merge_unless_ignorefailed(
    session: Session, tmp_path: Path
) -> None:
    j = split_job(tmp_path, [TextMerger(files=["stdout", "stderr"])])
    (tmp_path / "extra").write_text("")
    j.submit()
    j.wait(timeout=60)
    (j.subjobs[1].outputdir / "stderr").unlink()
    j.postprocessors = [TextMerger(files=["stderr"])]
    assert j.runPostProcessors() is False
    assert j.status == "failed" and f"{j.id}.1" in causes(j)[-1]
    j.postprocessors = [TextMerger(files=["stderr"], ignorefailed=True)]
    assert j.runPostProcessors() is True and j.status == "completed"


def test_a_named_file_no_subjob_wrote_fails_the_merge_instead_of_being_passed_over(
    session: Session, tmp_path: Path
) -> None:
    j = split_job(tmp_path, [TextMerger(files=["stdout", "histos.txt"])], 2)
    j.submit()
    assert j.wait(timeout=60) == "failed"
    assert "histos.txt is missing in subjob(s)" in causes(j)[-1]
    j.postprocessors = [TextMerger(files=["stdout", "histos.txt", "*.nothing"], ignorefailed=True)]
    ok = j.runPostProcessors()
    assert ok is True, causes(j)[-1]  # a wildcard may match nothing; the rest merged
    assert (j.outputdir / "stdout").exists() and not (j.outputdir / "histos.txt").exists()


def test_custom_merger_calls_the_users_mergefiles(session: Session, tmp_path: Path) -> None:
    merge = tmp_path / "merge.py"
    merge.write_text(
        textwrap.dedent("""\
            def mergefiles(file_list, output_file):
                total = sum(int(open(f).read().split()[1]) for f in file_list)
                with open(output_file, "w") as out:
                    out.write(f"{len(file_list)} {total}\\n")
        """)
    )
    j = split_job(tmp_path, [CustomMerger(module=str(merge), files=["result.*"])])
    j.submit()
    assert j.wait(timeout=60) == "completed"
    assert (j.outputdir / "result.txt").read_text() == "3 6\n"


def test_a_merger_failing_on_its_second_file_leaves_no_first_one_behind(
    session: Session, tmp_path: Path
) -> None:
    merge = tmp_path / "merge.py"
    merge.write_text(
        textwrap.dedent("""\
            def mergefiles(file_list, output_file):
                if file_list[0].endswith("stdout"):
                    raise ValueError("cannot merge stdout")
                open(output_file, "w").write("merged\\n")
        """)
    )
    j = split_job(tmp_path, [CustomMerger(module=str(merge), files=["result.txt", "stdout"])], 2)
    j.submit()
    assert j.wait(timeout=60) == "failed"
    assert "cannot merge stdout" in causes(j)[-1]
    assert sorted(p.name for p in j.outputdir.iterdir() if not p.name.startswith("__")) == []
    # Nothing blocks the next run: merged by hand with a merger that works, it completes.
    j.postprocessors = [TextMerger(files=["result.txt", "stdout"])]
    assert j.runPostProcessors() is True
    assert (j.outputdir / "result.txt").exists() and (j.outputdir / "stdout").exists()


def test_a_custom_merger_that_raises_fails_the_job_saying_why(
    session: Session, tmp_path: Path
) -> None:
    merge = tmp_path / "merge.py"
    merge.write_text("def mergefiles(file_list, output_file):\n    raise ValueError('bad data')\n")
    j = split_job(tmp_path, [CustomMerger(module=str(merge), files=["stdout"])])
    j.submit()
    assert j.wait(timeout=60) == "failed"
    assert causes(j)[-1] == "postprocessing failed: CustomMerger: ValueError: bad data"
    assert jobs.select(status="failed").ids() == [j.id]
    with pytest.raises(
        JobError, match=r"postprocessing failed: fix that and call runPostProcessors"
    ):
        j.resubmit(keep_going=False)
    assert j.force_status("completed") and j.status == "completed"
    assert causes(j)[-1] == "forced by user"


def test_a_merger_calling_exit_fails_the_job_and_the_monitor_goes_on(
    session: Session, tmp_path: Path
) -> None:
    merge = tmp_path / "merge.py"
    merge.write_text("import sys\ndef mergefiles(file_list, output_file):\n    sys.exit(3)\n")
    j = split_job(tmp_path, [CustomMerger(module=str(merge), files=["stdout"])], 1)
    j.submit()
    assert j.wait(timeout=60) == "failed"
    assert causes(j)[-1] == "postprocessing failed: CustomMerger: SystemExit: 3"
    again = split_job(tmp_path, [TextMerger(files=["stdout"])], 1)
    again.submit()
    assert again.wait(timeout=60) == "completed"


def test_text_merger_with_compress_writes_the_merge_gzipped_beside_no_plain_copy(
    session: Session, tmp_path: Path
) -> None:
    j = split_job(tmp_path, [TextMerger(files=["stdout"], compress=True)], 2)
    j.submit()
    assert j.wait(timeout=60) == "completed"
    assert not (j.outputdir / "stdout").exists()
    with gzip.open(j.outputdir / "stdout.gz", "rt") as merged:
        assert merged.read() == "".join(
            f"# ==> subjob {j.id}.{i}: stdout <==\nline {i + 1}\n" for i in range(2)
        )


def gzip_job(tmp_path: Path, body: str, merger: TextMerger, count: int = 2) -> Job:
    """A split job whose subjob N writes ``out.txt.gz`` by the shell line ``body``
    (``$1`` is N + 1), merged by ``merger``."""
    path = tmp_path / "gz.sh"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return Job(
        application=Executable(exe=str(path)),
        splitter=ArgSplitter(args=[[str(i)] for i in range(1, count + 1)]),
        outputfiles=[LocalFile("out.txt.gz")],
        postprocessors=[merger],
    )


@pytest.mark.parametrize("compress", [False, True])
def test_text_merger_merges_gzipped_outputs_into_one_gzip_file(
    session: Session, tmp_path: Path, compress: bool
) -> None:
    body = 'printf "line $1\\nmore $1" | gzip > out.txt.gz'
    j = gzip_job(tmp_path, body, TextMerger(files=["out.txt.gz"], compress=compress))
    j.submit()
    assert j.wait(timeout=60) == "completed"
    # One gzip file under the name the subjobs used (never out.txt.gz.gz), holding the
    # text of each part, headed by its subjob.
    assert sorted(p.name for p in j.outputdir.glob("out.txt*")) == ["out.txt.gz"]
    with gzip.open(j.outputdir / "out.txt.gz", "rt") as merged:
        assert merged.read() == "".join(
            f"# ==> subjob {j.id}.{i}: out.txt.gz <==\nline {i + 1}\nmore {i + 1}\n"
            for i in range(2)
        )


@pytest.mark.parametrize("packed", [False, True])
def test_text_merger_copies_each_part_byte_for_byte(
    session: Session, tmp_path: Path, packed: bool
) -> None:
    # Text that is not UTF-8 (Latin-1 "café", a lone 0xff) is merged as it was written,
    # never with replacement characters in its place.
    name = "out.txt.gz" if packed else "out.txt"
    write = f"| gzip > {name}" if packed else f"> {name}"
    body = rf"""printf 'caf\351 %s\n\377' "$1" {write}"""
    j = gzip_job(tmp_path, body, TextMerger(files=[name]))
    j.outputfiles = [LocalFile(name)]
    j.submit()
    assert j.wait(timeout=60) == "completed"
    merged = j.outputdir / name
    data = gzip.decompress(merged.read_bytes()) if packed else merged.read_bytes()
    assert data == b"".join(
        f"# ==> subjob {j.id}.{i}: {name} <==\n".encode()
        + f"caf\xe9 {i + 1}\n\xff\n".encode("latin-1")
        for i in range(2)
    )


@pytest.mark.parametrize(
    ("second", "says"),
    [
        # gzip's magic bytes, then nothing a gzip reader can follow
        (r"printf '\037\213\010\000garbage' > out.txt.gz", "is a damaged gzip file"),
        # a gzip file cut short
        ("seq 1 20000 | gzip | head -c 300 > out.txt.gz", "is a damaged gzip file"),
        # not text at all
        (r"printf 'a\000b' | gzip > out.txt.gz", "TextMerger merges text: out.txt.gz of subjob"),
        # named .gz but not gzip at all: text, or binary
        ("echo plain > out.txt.gz", "is not a gzip file, though its name ends in .gz"),
        (r"printf 'a\000b' > out.txt.gz", "is not a gzip file, though its name ends in .gz"),
    ],
)
def test_text_merger_fails_the_job_rather_than_write_a_corrupt_merge(
    session: Session, tmp_path: Path, second: str, says: str
) -> None:
    body = f'if [ "$1" = 1 ]; then echo ok | gzip > out.txt.gz; else {second}; fi'
    j = gzip_job(tmp_path, body, TextMerger(files=["out.txt.gz"]))
    j.submit()
    assert j.wait(timeout=60) == "failed"
    assert causes(j)[-1].startswith("postprocessing failed: ")
    assert says in causes(j)[-1] and f"subjob {j.id}.1" in causes(j)[-1]
    assert "\n" not in causes(j)[-1]
    assert list(j.outputdir.glob("*out.txt*")) == []  # no merge, not even half of one


# -- checkers ---------------------------------------------------------------------------


def test_file_checker_fails_only_the_subjobs_whose_output_has_the_string(
    session: Session, tmp_path: Path
) -> None:
    j = split_job(tmp_path, [FileChecker(files=["stdout"], searchStrings=["line 2"])])
    j.submit()
    assert j.wait(timeout=60) == "failed"
    assert [sj.status for sj in j.subjobs] == ["completed", "failed", "completed"]
    assert causes(j.subjobs[1])[-1] == "postprocessing: FileChecker: 'line 2' found in stdout"
    assert "1 subjob(s)" in causes(j)[-1]


def test_file_checker_with_fail_if_found_off_needs_the_string(
    session: Session, tmp_path: Path
) -> None:
    j = split_job(
        tmp_path, [FileChecker(files=["stdout"], searchStrings=["line 3"], failIfFound=False)]
    )
    j.submit()
    j.wait(timeout=60)
    assert [sj.status for sj in j.subjobs] == ["failed", "failed", "completed"]


def test_a_missing_file_fails_the_check_unless_files_need_not_exist(
    session: Session, tmp_path: Path
) -> None:
    strict = split_job(tmp_path, [FileChecker(files=["absent.log"], searchStrings=["x"])], 1)
    lenient = split_job(
        tmp_path,
        [FileChecker(files=["absent.log"], searchStrings=["x"], filesMustExist=False)],
        1,
    )
    strict.submit()
    lenient.submit()
    assert strict.wait(timeout=60) == "failed"
    assert "filesMustExist=False" in causes(strict.subjobs[0])[-1]
    assert lenient.wait(timeout=60) == "completed"


def test_check_master_checks_the_merged_output_and_fails_only_the_master(
    session: Session, tmp_path: Path
) -> None:
    on_master = FileChecker(
        files=["stdout"], searchStrings=["line 2"], checkSubjobs=False, checkMaster=True
    )
    j = split_job(tmp_path, [on_master, TextMerger(files=["stdout"])])
    j.submit()
    assert j.wait(timeout=60) == "failed"
    assert [sj.status for sj in j.subjobs] == ["completed"] * 3
    assert causes(j)[-1] == "postprocessing failed: FileChecker: 'line 2' found in stdout"
    # Put right by hand, the master completes; the subjobs were never touched.
    j.postprocessors = [TextMerger(files=["stdout"], overwrite=True)]
    assert j.runPostProcessors() is True
    assert j.status == "completed"


def test_a_checker_with_both_switches_off_checks_nothing(session: Session, tmp_path: Path) -> None:
    off = FileChecker(
        files=["stdout"], searchStrings=["line"], checkSubjobs=False, checkMaster=False
    )
    split = split_job(tmp_path, [off], 2)
    single = Job(application=Executable(exe=program(tmp_path), args=["1"]), postprocessors=[off])
    split.submit()
    single.submit()
    assert split.wait(timeout=60) == "completed"
    assert single.wait(timeout=60) == "completed"


def test_custom_checker_gets_each_subjob_and_fails_those_it_rejects(
    session: Session, tmp_path: Path
) -> None:
    check = tmp_path / "check.py"
    check.write_text(
        "def check(job):\n    return (job.outputdir / 'stdout').read_text() != 'line 1\\n'\n"
    )
    j = split_job(tmp_path, [CustomChecker(module=str(check))])
    j.submit()
    assert j.wait(timeout=60) == "failed"
    assert [sj.status for sj in j.subjobs] == ["failed", "completed", "completed"]
    assert "check() of check.py returned False" in causes(j.subjobs[0])[-1]


def test_metadata_is_read_at_completion_and_checked_by_expression(
    session: Session, tmp_path: Path
) -> None:
    j = split_job(tmp_path, [MetaDataChecker(expression="ok and n >= 2")])
    j.submit()
    assert j.wait(timeout=60) == "failed"
    assert [sj.metadata for sj in j.subjobs] == [{"n": i, "ok": True} for i in (1, 2, 3)]
    assert [sj.status for sj in j.subjobs] == ["failed", "completed", "completed"]
    with pytest.raises(SchemaError, match="read-only"):
        j.subjobs[0].metadata = {}


def test_an_unsplit_job_is_checked_itself_and_merging_has_nothing_to_do(
    session: Session, tmp_path: Path
) -> None:
    j = Job(
        application=Executable(exe=program(tmp_path), args=["5"]),
        outputfiles=[LocalFile("__metadata__.json")],
        postprocessors=[TextMerger(files=["stdout"]), MetaDataChecker(expression="n == 4")],
    )
    j.submit()
    assert j.wait(timeout=60) == "failed"
    assert j.metadata == {"n": 5, "ok": True}
    assert causes(j)[-1] == "postprocessing: MetaDataChecker: 'n == 4' is false"


def test_mergers_run_before_checkers_whatever_the_list_order(
    session: Session, tmp_path: Path
) -> None:
    check = tmp_path / "check.py"
    # The checker sees the merged file only if the merger ran first.
    check.write_text(
        "def check(job):\n"
        "    import pathlib\n"
        "    return (job.outputdir.parent.parent / 'output' / 'stdout').exists()\n"
    )
    j = split_job(tmp_path, [CustomChecker(module=str(check)), TextMerger(files=["stdout"])])
    j.submit()
    assert j.wait(timeout=60) == "completed"


def test_resubmitted_subjobs_are_postprocessed_again(session: Session, tmp_path: Path) -> None:
    flag = tmp_path / "reject"
    flag.write_text("")
    check = tmp_path / "check.py"
    check.write_text(f"import os\ndef check(job):\n    return not os.path.exists({str(flag)!r})\n")
    j = split_job(tmp_path, [TextMerger(files=["stdout"]), CustomChecker(module=str(check))], 2)
    j.submit()
    assert j.wait(timeout=60) == "failed"
    flag.unlink()
    j.resubmit()
    assert j.wait(timeout=60) == "completed"
    assert [sj.status for sj in j.subjobs] == ["completed", "completed"]


# -- bad input --------------------------------------------------------------------------


def test_bad_postprocessor_settings_are_refused_with_one_line_and_nothing_changes(
    session: Session, tmp_path: Path
) -> None:
    merger = TextMerger(files=["stdout"])
    with pytest.raises(SchemaError, match="has no attribute 'file'; did you mean 'files'"):
        merger.file = ["x"]
    with pytest.raises(SchemaError, match=r"TextMerger\.overwrite: expected"):
        merger.overwrite = "yes"
    with pytest.raises(SchemaError, match=r"TextMerger\.files: expected"):
        merger.files = "stdout"
    assert merger.files == ["stdout"] and merger.overwrite is False
    with pytest.raises(SchemaError, match=r"does-not-exist\.py"):
        CustomMerger(module=str(tmp_path / "does-not-exist.py"))
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def merge(a, b):\n    pass\n")
    with pytest.raises(SchemaError, match=r"has no mergefiles\(\)"):
        CustomMerger(module=str(wrong))
    with pytest.raises(SchemaError, match=r"has no check\(\)"):
        CustomChecker(module=str(wrong))
    with pytest.raises(SchemaError, match="Call is not allowed"):
        MetaDataChecker(expression="__import__('os').system('true')")
    with pytest.raises(SchemaError, match="Attribute is not allowed"):
        MetaDataChecker(expression="n.real > 1")
    j = Job(postprocessors=[merger])
    with pytest.raises(GangaError, match="postprocessor"):
        j.postprocessors = ["Local"]
    with pytest.raises(GangaError):
        j.postprocessors = [TextMerger(files=["a"]), 3]
    assert [type(p).__name__ for p in j.postprocessors] == ["TextMerger"]
    with pytest.raises(JobError, match="is new"):
        j.runPostProcessors()


def test_a_checker_naming_metadata_the_job_lacks_fails_it_saying_so(
    session: Session, tmp_path: Path
) -> None:
    j = split_job(tmp_path, [MetaDataChecker(expression="events > 1")], 1)
    j.submit()
    assert j.wait(timeout=60) == "failed"
    assert "no metadata 'events'" in causes(j.subjobs[0])[-1]


def test_a_postprocessor_list_is_copied_with_the_job_and_changeable_at_resubmit(
    session: Session, tmp_path: Path
) -> None:
    j = split_job(tmp_path, [TextMerger(files=["stdout"])], 1)
    clone = j.copy()
    assert [p.files for p in clone.postprocessors] == [["stdout"]]
    j.submit()
    j.wait(timeout=60)
    j.postprocessors = [TextMerger(files=["stdout"], overwrite=True)]
    assert j.postprocessors[0].overwrite is True


def test_a_finished_jobs_postprocessors_change_in_place_as_by_assignment(
    session: Session, tmp_path: Path
) -> None:
    j = split_job(tmp_path, [FileChecker(files=["absent.log"], searchStrings=["x"])], 2)
    j.submit()
    assert j.wait(timeout=60) == "failed"
    j.postprocessors[0].filesMustExist = False  # the Ganga habit: fix the option, run again
    j.postprocessors.append(TextMerger(files=["stdout"]))
    assert j.postprocessors[0].filesMustExist is False
    assert j.runPostProcessors() is False  # the checker's failures stay until resubmitted
    assert (j.outputdir / "stdout").exists()
    j.retry = Retry(attempts=1)
    j.retry.attempts = 2  # a part that may change at any time, changed in place
    assert j.retry.attempts == 2
    with pytest.raises(JobError, match=r"application\.args can no longer be changed"):
        j.application.args.append("x")
    with pytest.raises(JobError, match="can no longer be changed"):
        j.subjobs[0].application.args.append("x")


# -- crash safety -----------------------------------------------------------------------

SLOW_SUBMITTER = textwrap.dedent("""
    import sys
    from ganga_like import *
    j = Job(application=Executable(exe=sys.argv[1]),
            splitter=ArgSplitter(args=[["1"], ["2"]]),
            postprocessors=[CustomMerger(module=sys.argv[2], files=["stdout"])])
    j.submit()
    print(j.id, flush=True)
    j.wait(timeout=120)
    print("waited", flush=True)
""")


def test_postprocessing_killed_midway_is_finished_once_by_the_next_session(
    gangadir: Path, env_for: dict[str, str], tmp_path: Path
) -> None:
    log = tmp_path / "merges.log"
    merge = tmp_path / "merge.py"
    merge.write_text(
        textwrap.dedent(f"""\
            import os, time
            def mergefiles(file_list, output_file):
                first = not os.path.exists({str(log)!r})
                with open({str(log)!r}, "a") as f:
                    f.write("started\\n")
                if first:
                    time.sleep(120)  # the first run is killed here
                with open(output_file, "w") as out:
                    out.write("".join(open(p).read() for p in file_list))
                with open({str(log)!r}, "a") as f:
                    f.write("finished\\n")
        """)
    )
    env = dict(env_for, GANGA_REPOSITORY_MODE="embedded")
    child = subprocess.Popen(
        [sys.executable, "-c", SLOW_SUBMITTER, program(tmp_path), str(merge)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        job_id = int(child.stdout.readline())
        assert wait_until(lambda: log.exists(), timeout=120)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert log.read_text() == "started\n"
    open_session(Settings(gangadir=gangadir, repository_mode="embedded"))
    try:
        j = jobs(job_id)
        assert j.wait(timeout=120) == "completed"
        assert (j.outputdir / "stdout").read_text() == "line 1\nline 2\n"
        assert log.read_text() == "started\nstarted\nfinished\n"
        # Later cycles do not run it again.
        for _ in range(3):
            current_session().monitor.run_once()
        assert log.read_text() == "started\nstarted\nfinished\n"
    finally:
        close_session()
        with contextlib.suppress(Exception):
            runner_client.stop(runner_dir(gangadir))


def test_postprocessors_show_in_the_terminal_and_html_displays_of_a_job(
    session: Session, tmp_path: Path
) -> None:
    from ganga_like.shell.display import job_html, job_text

    j = Job(postprocessors=[TextMerger(files=["stdout"]), MetaDataChecker(expression="n > 1")])
    text = job_text(j)
    assert "postprocessors: [TextMerger(files=['stdout']), MetaDataChecker(" in text
    assert "MetaDataChecker(expression=&#x27;n &gt; 1&#x27;)" in job_html(j)


def test_a_module_gone_by_submit_is_refused_there_and_by_run_time_fails_the_job(
    session: Session, tmp_path: Path
) -> None:
    check = tmp_path / "check.py"
    check.write_text("def check(job):\n    return True\n")
    j = split_job(tmp_path, [CustomChecker(module=str(check))], 1)
    check.unlink()
    with pytest.raises(GangaError, match=r"CustomChecker\.module .*check\.py: No such file"):
        j.submit()
    assert j.status == "new" and len(j.subjobs) == 0
    check.write_text("def check(job):\n    return True\n")
    j.submit()
    assert j.wait(timeout=60) == "completed"
    check.unlink()
    assert j.runPostProcessors() is False
    assert (
        causes(j.subjobs[0])[-1] == f"postprocessing: CustomChecker: module {check} does not exist"
    )


def test_run_postprocessors_by_hand_is_refused_while_the_monitor_runs_them(
    session: Session, tmp_path: Path
) -> None:
    started, go = tmp_path / "started", tmp_path / "go"
    merge = tmp_path / "merge.py"
    merge.write_text(
        textwrap.dedent(f"""\
            import os, time, shutil
            def mergefiles(file_list, output_file):
                open({str(started)!r}, "w").close()
                deadline = time.monotonic() + 120
                while not os.path.exists({str(go)!r}) and time.monotonic() < deadline:
                    time.sleep(0.05)
                shutil.copy(file_list[0], output_file)
        """)
    )
    j = split_job(tmp_path, [CustomMerger(module=str(merge), files=["stdout"])], 1)
    j.submit()
    try:
        assert wait_until(started.exists, timeout=60)
        with pytest.raises(JobError, match="being run by the monitor"):
            j.runPostProcessors()
    finally:
        go.write_text("")
    assert j.wait(timeout=60) == "completed"
    assert (j.outputdir / "stdout").read_text() == "line 1\n"


def test_a_run_by_hand_is_not_run_by_the_monitor_at_the_same_time(
    session: Session, tmp_path: Path
) -> None:
    calls = tmp_path / "calls"
    merge = tmp_path / "merge.py"
    # In the middle of the run by hand (the second merge), the monitor runs a whole cycle
    # and its pass over the jobs recorded pending, where the run by hand recorded this one.
    merge.write_text(
        textwrap.dedent(f"""\
            from ganga_like.runtime.session import current_session
            def mergefiles(file_list, output_file):
                with open({str(calls)!r}, "a") as log:
                    log.write("merged\\n")
                open(output_file, "w").write("merged\\n")
                if open({str(calls)!r}).read().count("merged") == 2:
                    current_session().monitor.run_once()
        """)
    )
    j = split_job(tmp_path, [CustomMerger(module=str(merge), files=["stdout"])], 2)
    j.submit()
    assert j.wait(timeout=60) == "completed"
    assert calls.read_text() == "merged\n"
    assert j.runPostProcessors() is True
    assert calls.read_text() == "merged\n" * 2
    # Nor after it: the run by hand recorded its outcome, nothing is left pending.
    session.monitor.run_once()
    assert calls.read_text() == "merged\n" * 2
    assert j._job._postprocessing is not None and j._job._postprocessing[0] == "done"
