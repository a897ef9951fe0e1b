"""Cloud Storage that fails (helpers/storage_faults.py) while the inputs are listed and
read: 503, 429, resets mid-response, stalls and refused connections, in both on_error
modes. An outage is waited out, nothing is skipped, and the result is exact against
bytes.split(); past --storage_timeout the job stops with exit 75 and one line."""

import gzip
import json
import os
import re
import time

import pytest
from helpers.bucket import cli, stocked_server
from helpers.storage_faults import REFUSE, RESET, STALL, STATUS, Fault

OUTAGE_EXIT = 75
# What the job says while it waits: a warning before the run, a progress line's end during it.
WAITED = re.compile(r"storage cannot be reached \(|; waiting for storage: gs://")


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
    yield from stocked_server(tmp_path_factory)


@pytest.fixture
def server(gcs):
    server, _ = gcs
    server.faults.clear()
    yield server
    server.faults.clear()


def read_words(copies, prefixes):
    words = {}
    for path, local in copies.items():
        if path.startswith(prefixes) and path.endswith(".txt"):
            with open(local, "rb") as f:
                words[path] = len(f.read().split())
    return words


def text_words(copies):
    """Words per object of the text inputs TEXT reads, gzip included."""
    words = read_words(copies, ("gs://data/corpus/", "gs://data/big/"))
    with open(copies["gs://data/corpus/zipped.txt.gz"], "rb") as f:
        words["gs://data/corpus/zipped.txt.gz"] = len(gzip.decompress(f.read()).split())
    return words


# Whole files, gzip streamed, and a large object read in ranges of 16 KB.
TEXT = ["--input", "gs://data/corpus", "--input", "gs://data/big", "--read_size", "16384"]


def read_faults():
    """Every kind of read fault at once, on objects of their own: a run meets all of them."""
    return [
        Fault(STATUS, kinds=("read",), objects="data/corpus/f000[0-2].txt", status=503, seconds=5.0),
        Fault(STATUS, kinds=("read",), objects="data/corpus/f000[3-5].txt", status=429, share=0.5, seconds=6.0),
        Fault(RESET, kinds=("read",), objects="data/big/*", after_bytes=3000, seconds=5.0),
        Fault(RESET, kinds=("read",), objects="data/corpus/zipped.txt.gz", after_bytes=100, seconds=4.0),
        Fault(STALL, kinds=("read",), objects="data/corpus/f001*", stall=1.5, times=3),
    ]


def errors_of(run):
    return [line for line in run.stderr.splitlines() if line.startswith("tf2_mapreduce: error:")]


def counted(server, args, tmp_path, env=None):
    output = str(tmp_path / "result.json")
    run = cli(server, args + ["--output", output], env=env)
    result = json.load(open(output)) if run.returncode == 0 else None
    return run, result


@pytest.mark.parametrize(
    "fault, on_error",
    [
        (Fault(STATUS, kinds=("list",), status=503, seconds=4.0), "fail"),
        (Fault(STATUS, kinds=("list",), status=503, seconds=4.0), "skip"),
        (Fault(STATUS, kinds=("stat",), status=429, seconds=4.0), "skip"),
        (Fault(REFUSE, kinds=("list",), seconds=4.0), "skip"),
    ],
    ids=["list-503-fail", "list-503-skip", "stat-429-skip", "refused-skip"],
)
def test_an_outage_while_listing_is_waited_out_and_nothing_is_skipped(gcs, server, tmp_path, fault, on_error):
    _, copies = gcs
    words = read_words(copies, ("gs://data/corpus/",))
    server.faults.add(fault)
    run, result = counted(server, ["--input", "gs://data/corpus", "--on_error", on_error], tmp_path)
    assert run.returncode == 0, run.stderr
    assert fault.hits > 0
    assert {f["path"]: f["words"] for f in result["per_file"] if f["path"] in words} == words
    assert result["skipped"] == []
    assert WAITED.search(run.stderr), run.stderr


@pytest.mark.parametrize("on_error", ["fail", "skip"])
def test_an_outage_past_the_storage_timeout_stops_with_its_own_exit_and_one_line(server, tmp_path, on_error):
    server.faults.add(Fault(STATUS, kinds=("list", "stat", "read"), status=503))
    started = time.monotonic()
    run, _ = counted(
        server, ["--input", "gs://data/corpus", "--on_error", on_error, "--storage_timeout", "3"], tmp_path
    )
    assert run.returncode == OUTAGE_EXIT, run.stderr
    assert time.monotonic() - started < 60
    [error] = errors_of(run)
    assert error.startswith("tf2_mapreduce: error: gs://data/corpus")
    assert "storage could not be reached" in error and "HTTP 503" in error and "--storage_timeout" in error
    assert "run the same command" in error
    assert not os.path.exists(tmp_path / "result.json")


def assert_exact(run, result, words):
    assert run.returncode == 0, run.stderr
    assert {f["path"]: f["words"] for f in result["per_file"]} == words
    assert result["skipped"] == []
    assert result["total_words"] == sum(words.values())


@pytest.mark.parametrize("on_error", ["fail", "skip"])
def test_reads_answered_503_429_reset_or_stalled_are_waited_out_and_the_result_is_exact(
    gcs, server, tmp_path, on_error
):
    _, copies = gcs
    faults = read_faults()
    for fault in faults:
        server.faults.add(fault)
    run, result = counted(server, TEXT + ["--on_error", on_error], tmp_path)
    assert_exact(run, result, text_words(copies))
    assert [fault.hits > 0 for fault in faults] == [True] * len(faults)
    assert WAITED.search(run.stderr), run.stderr


def test_connections_refused_mid_job_are_waited_out_and_the_result_is_exact(gcs, server, tmp_path):
    _, copies = gcs
    fault = Fault(REFUSE, kinds=("read",), start=0.3, seconds=5.0)
    server.faults.add(fault)
    run, result = counted(server, TEXT + ["--on_error", "skip"], tmp_path)
    assert_exact(run, result, text_words(copies))
    assert fault.hits > 0
