"""XRootDFile against a real XRootD server: inputs fetched or passed by URL, outputs
uploaded to a pattern (the subjob keeps the URLs), failures naming the URL."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from ganga_like import (
    DatasetSplitter,
    Executable,
    GangaDataset,
    Job,
    JobError,
    LocalFile,
    SchemaError,
    XRootDFile,
)
from ganga_like.runtime.session import Session

from .waiting import wait_until
from .xrootd_server import (
    listing,
    private_server,
    put,
    readonly_url,
    remote_text,
    shared_url,
    stop,
)


@pytest.fixture
def area() -> str:
    """A directory of this test's own on the shared server: ``root://h:p//tests/<id>``."""
    return f"{shared_url()}/tests/{uuid.uuid4().hex[:12]}"


def sh(command: str) -> Executable:
    return Executable(exe="/bin/sh", args=["-c", command])


def cause(job: Job) -> str:
    return str(job.history[-1].cause)


def test_an_input_is_fetched_into_the_work_directory_before_the_program_runs(
    session: Session, area: str
) -> None:
    put(f"{area}/in/data.txt", "forty-two\n")
    j = Job(
        application=sh("cat data.txt calib/c.txt"),
        inputfiles=[
            XRootDFile(f"{area}/in/data.txt"),
            XRootDFile(f"{area}/in/data.txt", "calib/c.txt"),  # a name of one's choice
        ],
    )
    j.submit()
    assert j.wait(timeout=60) == "completed", cause(j)
    assert (j.outputdir / "stdout").read_text() == "forty-two\nforty-two\n"


def test_an_input_not_staged_reaches_the_program_as_its_url(session: Session, area: str) -> None:
    url = f"{area}/in/big.root"
    put(url, "read over the network\n")
    j = Job(
        application=sh('ls; xrdcp --nopbar "$GANGA_INPUT_URLS" -'),
        inputfiles=[XRootDFile(url, stage=False)],
    )
    j.submit()
    assert j.wait(timeout=60) == "completed", cause(j)
    # Not fetched: the work directory holds no big.root, the program read the URL.
    assert (j.outputdir / "stdout").read_text() == "read over the network\n"


def test_outputs_are_uploaded_to_the_pattern_and_the_subjobs_keep_the_urls(
    session: Session, area: str
) -> None:
    j = Job(
        application=sh('echo "sub $GANGA_SUBJOB_ID" > result.txt; echo log > run.log'),
        splitter=DatasetSplitter(),
        inputdata=GangaDataset(files=["/dev/null", "/dev/null"]),
        outputfiles=[XRootDFile(f"{area}/out/{{jid}}/{{sid}}/{{name}}", "*.txt")],
    )
    j.submit()
    assert j.wait(timeout=60) == "completed", [cause(s) for s in j.subjobs]
    for sj in j.subjobs:
        url = f"{area}/out/{j.id}/{sj.id}/result.txt"
        assert sj.outputfiles[0].locations == [url]
        assert remote_text(url) == f"sub {sj.id}\n"
    # Only what the pattern matched, and no temporary name left behind.
    assert listing(f"{area}/out/{j.id}/0") == ["result.txt"]
    # The master's file stays the pattern the user gave.
    assert j.outputfiles[0].locations == []


def test_a_wildcard_uploads_every_match_and_a_job_not_split_has_no_sid(
    session: Session, area: str
) -> None:
    j = Job(
        application=sh("echo a > a.dat; echo b > b.dat; echo c > c.txt"),
        outputfiles=[XRootDFile(f"{area}/{{jid}}/{{sid}}/{{name}}", "*.dat")],
    )
    j.submit()
    assert j.wait(timeout=60) == "completed", cause(j)
    urls = [f"{area}/{j.id}/a.dat", f"{area}/{j.id}/b.dat"]
    assert j.outputfiles[0].locations == urls
    assert [remote_text(u) for u in urls] == ["a\n", "b\n"]


def test_a_missing_input_fails_the_subjob_naming_the_url(session: Session, area: str) -> None:
    url = f"{area}/no/such.txt"
    j = Job(application=sh("echo ran > ran.txt"), inputfiles=[XRootDFile(url)])
    j.submit()
    assert j.wait(timeout=60) == "failed"
    assert f"input {url} not fetched" in cause(j)
    assert "no such file" in cause(j).lower()
    assert j.exit_code is None  # the program never ran
    assert not (j.outputdir.parent / "work" / "ran.txt").exists()


def test_an_output_pattern_matching_nothing_fails_saying_so(session: Session, area: str) -> None:
    j = Job(application=sh("true"), outputfiles=[XRootDFile(f"{area}/{{name}}", "*.root")])
    j.submit()
    assert j.wait(timeout=60) == "failed"
    assert "output pattern '*.root'" in cause(j) and "matched no file" in cause(j)
    assert j.outputfiles[0].locations == []


def test_an_upload_refused_by_the_server_fails_with_permission_denied(
    session: Session,
) -> None:
    url = f"{readonly_url()}/{uuid.uuid4().hex[:8]}/out.txt"
    j = Job(application=sh("echo x > out.txt"), outputfiles=[XRootDFile(url)])
    j.submit()
    assert j.wait(timeout=60) == "failed"
    assert f"not uploaded to {url}" in cause(j) and "permission denied" in cause(j).lower()
    assert j.exit_code == 0  # the program succeeded; its upload did not


def test_a_server_down_fails_the_upload_and_leaves_no_partial_file(session: Session) -> None:
    with private_server() as (url, data, directory):
        target = f"{url.rstrip('/')}//out/result.txt"
        # The client retries a server that does not answer for minutes by default; its
        # own variable, in the job's environment, makes it give up at the first refusal.
        app = sh("echo x > result.txt")
        app.env = {"XRD_CONNECTIONRETRY": "1"}
        j = Job(application=app, outputfiles=[XRootDFile(target)])
        stop(directory)
        j.submit()
        assert j.wait(timeout=60) == "failed"
        assert f"not uploaded to {target}" in cause(j)
        assert j.outputfiles[0].locations == []
        assert not (data / "out").exists() or list((data / "out").iterdir()) == []


def test_a_url_given_to_localfile_is_refused_naming_xrootdfile(session: Session) -> None:
    j = Job(application=sh("true"))
    with pytest.raises(SchemaError) as refused:
        j.inputfiles = [LocalFile("root://eos.example.org//eos/data.root")]
    text = str(refused.value)
    assert "\n" not in text and text.startswith("LocalFile.namePattern: ")
    assert "XRootDFile('root://eos.example.org//eos/data.root')" in text
    assert j.inputfiles == []


def test_a_url_without_the_double_slash_is_refused_in_one_line() -> None:
    with pytest.raises(SchemaError, match=r"^XRootDFile\.url: expected an XRootD URL"):
        XRootDFile("root://host/relative/path")


def test_a_dataset_of_xrootd_files_is_split_one_file_per_subjob(
    session: Session, area: str
) -> None:
    urls = [f"{area}/data/part{i}.txt" for i in range(3)]
    for i, url in enumerate(urls):
        put(url, f"part {i}\n")
    j = Job(
        application=sh('cat "$GANGA_INPUTDATA"'),
        splitter=DatasetSplitter(files_per_subjob=1),
        inputdata=GangaDataset(files=[XRootDFile(u) for u in urls]),
    )
    j.submit()
    assert j.wait(timeout=90) == "completed", [cause(s) for s in j.subjobs]
    assert [(sj.outputdir / "stdout").read_text() for sj in j.subjobs] == [
        "part 0\n",
        "part 1\n",
        "part 2\n",
    ]


def test_a_resubmitted_subjob_that_fails_keeps_no_locations_of_the_earlier_run(
    session: Session, area: str, tmp_path: Path
) -> None:
    broken = tmp_path / "broken"
    j = Job(
        application=sh(f"[ -e {broken} ] && exit 3; echo x > out.txt"),
        outputfiles=[XRootDFile(f"{area}/{{jid}}/{{name}}", "out.txt")],
    )
    j.submit()
    assert j.wait(timeout=60) == "completed", cause(j)
    assert j.outputfiles[0].locations == [f"{area}/{j.id}/out.txt"]
    broken.touch()
    j.resubmit()
    assert j.wait(timeout=60) == "failed"
    assert j.outputfiles[0].locations == []


def test_a_server_stopped_during_the_upload_leaves_no_file_under_the_final_name(
    session: Session,
) -> None:
    with private_server() as (url, data, directory):
        target = f"{url.rstrip('/')}//out/big.bin"
        # 64 MiB at 4 MiB/s (the client's own rate limit): the upload is still going when
        # the test, having seen its temporary file on the server's disk, stops the server.
        app = sh("head -c 67108864 /dev/zero > big.bin")
        app.env = {"XRD_CONNECTIONRETRY": "1", "GANGA_XRDCP_OPTIONS": "--xrate 4M"}
        j = Job(application=app, outputfiles=[XRootDFile(target)])
        j.submit()
        assert wait_until(lambda: list((data / "out").glob(".big.bin.ganga-partial-*")), 60)
        stop(directory)
        assert j.wait(timeout=60) == "failed"
        assert f"output big.bin not uploaded to {target}" in cause(j), cause(j)
        assert not (data / "out" / "big.bin").exists()
        assert j.outputfiles[0].locations == []


def test_every_reader_of_the_failure_note_looks_for_the_name_the_wrapper_writes() -> None:
    """The runner and the Dask worker import nothing of ganga_like: each has a twin."""
    from ganga_like.model import workspace
    from ganga_like_dask import task
    from ganga_like_runner import protocol
    from ganga_like_std import xrootd_transfer

    names = {workspace.FAILURE_NOTE, protocol.FAILURE_NOTE, task.FAILURE_NOTE}
    assert names == {xrootd_transfer.FAILURE_NOTE}


def test_killing_a_job_ends_its_program_and_uploads_nothing(
    session: Session, area: str, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    j = Job(
        application=sh(f"echo $$ > {pid_file}; echo x > out.txt; exec sleep 600"),
        outputfiles=[XRootDFile(f"{area}/{{jid}}/out.txt")],
    )
    j.submit()
    assert wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 60)
    program = int(pid_file.read_text())
    j.kill()
    assert j.wait(timeout=60) == "killed"
    assert wait_until(lambda: not Path(f"/proc/{program}").exists(), 30)
    assert listing(area) == []
    assert j.outputfiles[0].locations == []


def test_without_the_client_the_subjob_fails_saying_what_to_install(
    session: Session, tmp_path: Path
) -> None:
    """No server needed: the transfer program looks for xrdcp first."""
    app = sh("true")
    app.env = {"PATH": str(tmp_path)}  # neither xrdcp nor xrdfs there
    j = Job(application=app, inputfiles=[XRootDFile("root://127.0.0.1:1//absent.txt")])
    j.submit()
    assert j.wait(timeout=60) == "failed"
    assert "xrdcp not found on PATH (it comes with the xrootd-client package)" in cause(j)


def test_an_input_name_outside_the_work_directory_fails_the_submission(
    session: Session,
) -> None:
    for name in ("/etc/passwd", "../up.txt"):
        j = Job(application=sh("true"), inputfiles=[XRootDFile("root://h//a.txt", name)])
        with pytest.raises(JobError, match="namePattern must be a path below it"):
            j.submit()
