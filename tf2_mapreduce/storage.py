"""Storage that cannot be reached, told from a bad input: which errors are an outage (Cloud
Storage answering 503 or 429, connections refused, reset or timed out), and the waiting
through one with a bounded back-off, for at most a stated time, before the job stops.

An outage is never a reason to leave an input out: `on_error="skip"` is for inputs that
are bad (corrupt, forbidden, gone). TensorFlow's gs:// client retries a failing request
itself (docs/runtime.md, G5-G9) and then gives up with "All N retry attempts failed";
what is matched in its text is confined to `outage_cause`.
"""

import re
import time
from collections.abc import Callable

from tf2_mapreduce import log
from tf2_mapreduce.errors import Error

__all__ = [
    "Outage",
    "OUTAGE_EXIT",
    "OUTAGE_MARK",
    "outage_path",
    "StorageOutage",
    "outage_cause",
    "Patience",
    "retrying",
    "waiting",
    "current",
    "log_wait",
]

OUTAGE_EXIT = 75  # EX_TEMPFAIL of sysexits.h: a temporary failure, the same command may be run again
FIRST_WAIT = 1.0  # seconds before the first retry of ours (TensorFlow's client retried already)
LONGEST_WAIT = 30.0  # seconds between retries at most
# How the native ops mark an outage met in a map step (native/storage_status.h): TensorFlow's
# own codes for it would have ClusterCoordinator take the worker for failed.
OUTAGE_MARK = "tf2_mapreduce: storage outage: "

# TensorFlow's gs:// client gives up with an AbortedError: "All 10 retry attempts failed.
# The last failure: Error executing an HTTP request: HTTP response code 503 ..." or
# "... libcurl code 7 meaning 'Couldn't connect to server' ...". A 403/404/410 is not
# retried, and comes as PermissionDenied/NotFound: a bad input, not an outage.
_GAVE_UP = re.compile(r"All \d+ retry attempts failed\. The last failure: (.*)", re.S)
_HTTP_STATUS = re.compile(r"HTTP response code (\d+)")
_LIBCURL = re.compile(r"libcurl code (\d+) meaning '(.*?)'(?:,|$)", re.M)  # "Couldn't connect to server"
_TRANSIENT_STATUS = {408, 429, 500, 502, 503, 504}
# A response cut short without a transport error: the client reads short, says this, and
# does not retry (native/storage_status.h).
_CUT_SHORT = "File contents are inconsistent"
# An upload's session gone, the upload to start over (the client says so, and retries it):
# "Upload to gs://b/x failed, caused by: ... HTTP response code 404". Not the object's 404.
_SESSION_LOST = re.compile(r"Upload to \S+ failed, caused by: ")
_WHEN_USING = re.compile(r"when (?:reading|writing) (\S+)")


def _message(error) -> str:
    return error.message if hasattr(error, "message") and hasattr(error, "error_code") else str(error)


def outage_cause(error) -> str | None:
    """A short cause if `error` (an exception) is storage that could not be reached, else
    None: TensorFlow's client giving up on a request that kept failing with a transient
    status (408, 429, 5xx), a transport error (refused, reset, timed out, cut short) or an
    upload's session lost, or such an error passed on without its retries, or one a
    native op marked (`OUTAGE_MARK`: its judgement stands). Pure."""
    message = _message(error)
    cause = _cause(message)
    if cause is None and OUTAGE_MARK in message:
        return message.split(OUTAGE_MARK, 1)[1].splitlines()[0].strip()[:120]
    return cause


def _cause(message):
    gave_up = _GAVE_UP.search(message)
    last = gave_up.group(1) if gave_up else message
    status = _HTTP_STATUS.search(last)
    if gave_up and status and _SESSION_LOST.match(last):
        return "an upload's session lost (HTTP %s)" % status.group(1)
    if status:
        code = int(status.group(1))
        return "HTTP %d" % code if (gave_up or code in _TRANSIENT_STATUS) and code not in (401, 403, 404, 410) else None
    curl = _LIBCURL.search(last)
    if curl:
        return curl.group(2).lower()
    if gave_up:
        return last.splitlines()[0].strip()[:120]
    if _CUT_SHORT in message:
        return "a response cut short"
    return None


def outage_path(error) -> str | None:
    """The path an outage met in a map step was met reading or writing, where TensorFlow says. Pure."""
    found = _WHEN_USING.search(_message(error))
    return found.group(1) if found else None


class StorageOutage(Error):
    """Storage could not be reached for longer than the job waits (`Patience.timeout`):
    `path`, the `cause`, and whether a rerun resumes. Exits `OUTAGE_EXIT`."""

    exit_code = OUTAGE_EXIT

    def __init__(self, path, cause, waited, resume=""):
        super().__init__(
            "%s: storage could not be reached for %.0fs (%s), past {setting:storage_timeout}; nothing was left "
            "out or counted twice: run the same command once it is back%s" % (path, waited, cause, resume)
        )
        self.path, self.cause, self.waited, self.resume = path, cause, waited, resume

    def __reduce__(self):  # pickled as it was made (`listing` sends it between processes)
        return type(self), (self.path, self.cause, self.waited, self.resume)


class Patience:
    """How long a job waits through a storage outage: up to `timeout` s from the first
    failure of a call that then keeps failing, retried after `FIRST_WAIT` s, doubling to
    `LONGEST_WAIT` s. `on_wait(path, cause, waited, left)` is told of each wait (from the
    thread that waits); by default each is logged."""

    def __init__(
        self,
        timeout: float = 600.0,
        on_wait: Callable | None = None,
        first: float = FIRST_WAIT,
        longest: float = LONGEST_WAIT,
    ):
        self.timeout = timeout
        self.on_wait = on_wait or log_wait
        self.first, self.longest = first, longest

    def call(self, fn: Callable, path: str):
        """`fn()`, called again while it fails with an outage (`outage_cause`), until it
        succeeds, fails otherwise (raised as it is), or has failed for `timeout` s
        (`StorageOutage` naming `path`). Blocking. `fn` must be safe to call again: a
        read, or a write whose result is not visible until it succeeds."""
        outage = None
        while True:
            try:
                value = fn()
                if outage is not None:
                    log.info("%s: storage reached again after %.0fs" % (path, time.monotonic() - outage.since))
                return value
            except Exception as e:  # noqa: BLE001 - only an outage is retried; the rest raised as it is
                cause = outage_cause(e)
                if cause is None:
                    raise
            outage = outage or Outage(self)
            time.sleep(outage.next_wait(path, cause))  # a retry interval, not a wait for a result


class Outage:
    """One outage, waited out with `patience`: since when it lasts, and how long to wait
    before the next try (from `patience.first` s, doubling to `patience.longest`)."""

    def __init__(self, patience: Patience):
        self.patience = patience
        self.since = time.monotonic()
        self._pause = patience.first

    def next_wait(self, path: str, cause: str, resume: Callable[[], str] = str) -> float:
        """Seconds to wait before the next try, told to `patience.on_wait`; raises
        `StorageOutage` (its text ending with `resume()`) once the outage has lasted
        `patience.timeout` s. Non-blocking."""
        waited = time.monotonic() - self.since
        if waited >= self.patience.timeout:
            raise StorageOutage(path, cause, waited, resume()) from None
        left = self.patience.timeout - waited
        self.patience.on_wait(path, cause, waited, left)
        pause = min(self._pause, self.patience.longest, left)
        self._pause *= 2
        return pause


def log_wait(path: str, cause: str, waited: float, left: float) -> None:
    """The default `Patience.on_wait`: a warning on the library's log."""
    log.warning(
        "%s: storage cannot be reached (%s) for %.0fs; retrying for up to %.0fs more ({setting:storage_timeout})"
        % (path, cause, waited, left)
    )


_patience = Patience()


def current() -> Patience:
    """The process's `Patience` (`waiting` sets it)."""
    return _patience


class waiting:  # noqa: N801 - a context manager, used as `with storage.waiting(...)`
    """Within it, `retrying` waits with `patience`: one job runs at a time in a process
    (TensorFlow allows one cluster a process), so this is the process's, seen by every
    thread and a forked child alike."""

    def __init__(self, patience: Patience):
        self.patience = patience

    def __enter__(self) -> Patience:
        global _patience
        self._before, _patience = _patience, self.patience
        return self.patience

    def __exit__(self, *exc) -> None:
        global _patience
        _patience = self._before


def retrying(fn: Callable, path: str):
    """`fn()` through an outage of the storage that holds `path` (`Patience.call` with the
    process's patience). Blocking."""
    return _patience.call(fn, path)
