"""Storage outages told from bad inputs (`storage.outage_cause`), on the messages TensorFlow
2.21's gs:// client gave against the test server's faults; waiting through an outage
(`storage.Patience`); and the test server's own reading of requests (helpers/storage_faults.py)."""

import pickle
import time

import pytest
import tensorflow as tf
from helpers.storage_faults import kind_of

from tf2_mapreduce.storage import OUTAGE_EXIT, OUTAGE_MARK, Patience, StorageOutage, outage_cause, outage_path

BODY = ' with body \'{"error": {"code": %d, "message": "injected by the test"}}\''
GAVE_UP = "All 3 retry attempts failed. The last failure: Error executing an HTTP request: "


@pytest.mark.parametrize(
    "error, cause",
    [
        (tf.errors.AbortedError(None, None, GAVE_UP + "HTTP response code 503" + BODY % 503), "HTTP 503"),
        (tf.errors.AbortedError(None, None, GAVE_UP + "HTTP response code 429" + BODY % 429), "HTTP 429"),
        (
            tf.errors.AbortedError(
                None,
                None,
                GAVE_UP + "libcurl code 56 meaning 'Failure when receiving data from the peer', error details: "
                "Recv failure: Unknown error 104",
            ),
            "failure when receiving data from the peer",
        ),
        (
            tf.errors.AbortedError(
                None,
                None,
                GAVE_UP + "libcurl code 18 meaning 'Transferred a partial file', error details: end of response "
                "with 278080 bytes missing",
            ),
            "transferred a partial file",
        ),
        (
            tf.errors.InternalError(
                None, None, OUTAGE_MARK + GAVE_UP + "HTTP response code 503 when reading gs://b/x.txt"
            ),
            "HTTP 503",
        ),
        # A native op's outage without an HTTP status (a local file system's UNAVAILABLE):
        # its mark alone says so.
        (
            tf.errors.InternalError(None, None, OUTAGE_MARK + "mount point gone when writing /mnt/x.tmp\nmore"),
            "mount point gone when writing /mnt/x.tmp",
        ),
        # An upload whose session is gone (after an answer lost): the client starts it over,
        # then gives up (docs/runtime.md, G11). The 404 is the session's, not the object's.
        (
            tf.errors.AbortedError(
                None,
                None,
                "All 2 retry attempts failed. The last failure: Upload to gs://b/out/x.tmp failed, caused by: "
                "Error executing an HTTP request: HTTP response code 404",
            ),
            "an upload's session lost (HTTP 404)",
        ),
        (
            tf.errors.AbortedError(
                None,
                None,
                GAVE_UP + "libcurl code 52 meaning 'Server returned nothing (no headers, no data)', error details: "
                "Empty reply from server",
            ),
            "server returned nothing (no headers, no data)",
        ),
        # Not retried by the client: a bad input, not an outage.
        (
            tf.errors.PermissionDeniedError(
                None, None, "Error executing an HTTP request: HTTP response code 403" + BODY % 403
            ),
            None,
        ),
        (
            tf.errors.NotFoundError(None, None, "Error executing an HTTP request: HTTP response code 410" + BODY % 410),
            None,
        ),
        (tf.errors.NotFoundError(None, None, "/x/a.txt; No such file or directory"), None),
        (tf.errors.DataLossError(None, None, "gs://b/a.gz; truncated GZIP file"), None),
        (OSError(5, "Input/output error"), None),
    ],
)
def test_an_outage_is_told_from_a_bad_input(error, cause):
    assert outage_cause(error) == cause


def test_the_path_of_an_outage_met_in_a_map_step():
    error = tf.errors.InternalError(None, None, OUTAGE_MARK + "... HTTP response code 503 when reading gs://b/x y.txt")
    assert outage_path(error) == "gs://b/x"  # a name with a space is cut there; the rest still says what failed


def test_patience_retries_an_outage_until_it_ends_and_no_other_error():
    calls, waits = [], []
    outage = tf.errors.AbortedError(None, None, GAVE_UP + "HTTP response code 503")

    def flaky():
        calls.append(time.monotonic())
        if len(calls) < 4:
            raise outage
        return "read"

    patience = Patience(60, lambda *wait: waits.append(wait), first=0.01, longest=0.02)
    assert patience.call(flaky, "gs://b/x") == "read"
    assert len(calls) == 4 and [w[:2] for w in waits] == [("gs://b/x", "HTTP 503")] * 3
    gaps = [b - a for a, b in zip(calls, calls[1:])]
    assert gaps[0] >= 0.01 and all(g >= 0.02 for g in gaps[1:]), gaps  # doubled, to the longest

    def forbidden():
        raise tf.errors.PermissionDeniedError(None, None, "HTTP response code 403")

    with pytest.raises(tf.errors.PermissionDeniedError):
        patience.call(forbidden, "gs://b/x")


def test_patience_gives_up_past_its_timeout_with_its_own_exit_status():
    def down():
        raise tf.errors.AbortedError(None, None, GAVE_UP + "libcurl code 7 meaning 'Couldn't connect to server'")

    started = time.monotonic()
    with pytest.raises(StorageOutage) as raised:
        Patience(0.2, lambda *wait: None, first=0.05).call(down, "gs://b/x")
    assert 0.2 <= time.monotonic() - started < 2
    assert raised.value.exit_code == OUTAGE_EXIT == 75
    assert raised.value.cli_message().startswith(
        "gs://b/x: storage could not be reached for 0s (couldn't connect to server), past --storage_timeout"
    )
    again = pickle.loads(pickle.dumps(raised.value))  # as the listing's child process sends it
    assert str(again) == str(raised.value) and again.exit_code == OUTAGE_EXIT


@pytest.mark.parametrize(
    "method, path, kind",
    [
        ("GET", "/storage/v1/b/data/o?prefix=corpus%2F&fields=items", ("list", "data/corpus/")),
        (
            "GET",
            "/storage/v1/b/data/o/corpus%2Ff1.txt?fields=size%2Cgeneration%2Cupdated",
            ("stat", "data/corpus/f1.txt"),
        ),
        ("GET", "/data/corpus/f1.txt", ("read", "data/corpus/f1.txt")),
        ("POST", "/upload/storage/v1/b/data/o?uploadType=resumable&name=out%2Fr.json", ("write", "data/out/r.json")),
        (
            "PUT",
            "/upload/storage/v1/b/data/o?uploadType=resumable&name=out%2Fr.json&upload_id=data%3Aout%2Fr.json%3A1",
            ("upload", "data/out/r.json"),
        ),
        ("POST", "/storage/v1/b/data/o/a%2Fx/rewriteTo/b/data/o/a%2Fy", ("copy", "data/a/x")),
        ("DELETE", "/storage/v1/b/data/o/a%2Fx", ("delete", "data/a/x")),
        ("GET", "/storage/v1/b/data", ("bucket", "data")),
    ],
)
def test_the_test_server_reads_what_a_request_asks(method, path, kind):
    assert kind_of(method, path) == kind
