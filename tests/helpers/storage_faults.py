"""Faults the test Cloud Storage server (gcs_server.py) injects by rule: a status answered
in place of the object, a connection reset after N bytes of a response, an upload cut off
after N bytes of its body, a stall before answering, or every connection refused; per
request kind and object, for a time window.

A rule matches a request by its kind (what TensorFlow's client asked, read from the
request line: `kind_of`) and its object (fnmatch on "bucket/name"); it fires on a share
of them (seeded, so a run can be repeated), at most `times` times, while its window is
open. The window is timed from the first request the rule matches, not from the clock:
"reads fail for 5 s" starts with the first read, however long the job took to get there.
Pure but for the clock; the server asks `Faults.verdict` of each request.
"""

import fnmatch
import random
import threading
import time
import urllib.parse
from dataclasses import dataclass, field

__all__ = ["Fault", "Faults", "kind_of", "KINDS", "STATUS", "RESET", "CUT", "STALL", "REFUSE"]

STATUS = "status"  # answer `status` (503, 429, 500...) with a JSON error body
RESET = "reset"  # answer (after `stall` s), but reset the connection after `after_bytes` bytes of the response
# An upload's data cut off (after `stall` s) once `after_bytes` of it came: those bytes are
# kept by its resumable session, as Cloud Storage may keep them, and no answer is sent.
CUT = "cut"
STALL = "stall"  # wait `seconds` before answering (the client's time-outs may fire first)
REFUSE = "refuse"  # every connection to the server cut and refused (matches whatever the request)

# What TensorFlow's gs:// client asks, by request: listing a prefix, an object's metadata
# (stat), an object's bytes (read, often a Range), an upload's start (write: a resumable
# session opened), its data or its status (upload: to the session), a rename's copy
# (rewriteTo), a delete, a bucket's metadata or layout.
KINDS = ("list", "stat", "read", "write", "upload", "copy", "delete", "bucket")


def kind_of(method, path):
    """(kind, "bucket/name" or "bucket") of a request: its method and its path as sent."""
    parsed = urllib.parse.urlparse(path)
    parts = [urllib.parse.unquote(p) for p in parsed.path.split("/")[1:]]
    query = urllib.parse.parse_qs(parsed.query)
    if parts[:1] == ["upload"]:  # /upload/storage/v1/b/<bucket>/o?name=...
        bucket = parts[4] if len(parts) > 4 else ""
        return ("upload" if "upload_id" in query else "write"), "%s/%s" % (bucket, query.get("name", [""])[0])
    if parts[:2] == ["storage", "v1"] and len(parts) >= 4 and parts[2] == "b":
        bucket = parts[3]
        if len(parts) == 4 or parts[4] != "o":
            return "bucket", bucket
        if len(parts) == 5:
            return ("write" if method == "POST" else "list"), "%s/%s" % (bucket, query.get("prefix", [""])[0])
        rest = parts[5:]
        if "rewriteTo" in rest or "copyTo" in rest:
            return "copy", "%s/%s" % (bucket, rest[0])
        name = "/".join(rest)
        if method == "DELETE":
            return "delete", "%s/%s" % (bucket, name)
        if method in ("PUT", "POST"):
            return "write", "%s/%s" % (bucket, name)
        return ("read" if query.get("alt") == ["media"] else "stat"), "%s/%s" % (bucket, name)
    if method == "PUT":  # a resumable upload's data, to the session's address
        return "upload", "/".join(parts)
    return "read", "/".join(parts)  # the XML API: storage.googleapis.com/<bucket>/<name>


@dataclass
class Fault:
    """One rule. `kinds`: those of `KINDS` it applies to (empty: all); `objects`: an fnmatch
    pattern of "bucket/name"; `share`: the fraction of matching requests it fires on;
    `times`: at most this many (None: no limit); `start`/`seconds`: its window, from the
    first request it matches (`seconds` None: open until removed). A REFUSE rule refuses
    every connection in its window, opened by the first request of its kinds and objects.
    `hits` counts the requests it fired on (for REFUSE, the connections it cut)."""

    action: str
    kinds: tuple = ()
    objects: str = "*"
    status: int = 503
    after_bytes: int = 0
    stall: float = 0.0
    share: float = 1.0
    times: int | None = None
    start: float = 0.0
    seconds: float | None = None
    seed: int = 0
    hits: int = 0
    opened: float | None = field(default=None, repr=False)
    _random: random.Random = field(default=None, repr=False)

    def open_at(self, now):
        if self.opened is None:
            return False
        after = now - self.opened - self.start
        return after >= 0 and (self.seconds is None or after < self.seconds)


class Faults:
    """The rules in force; thread safe (the server answers each connection on a thread)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._rules = []

    def add(self, fault: Fault) -> Fault:
        """Puts `fault` in force, afresh (a rule added again starts over: parametrized tests share one)."""
        fault.hits, fault.opened = 0, None
        fault._random = random.Random(fault.seed)
        with self._lock:
            self._rules.append(fault)
        return fault

    def clear(self):
        with self._lock:
            self._rules = []

    def refusing(self) -> bool:
        """Whether a REFUSE rule's window is open now (a cut connection counted)."""
        return self._fire(lambda rule: rule.action == REFUSE) is not None

    def verdict(self, method, path):
        """The rule that fires on this request (its `hits` counted), or None."""
        kind, name = kind_of(method, path)

        def matches(rule):
            return (not rule.kinds or kind in rule.kinds) and fnmatch.fnmatchcase(name, rule.objects)

        now = time.monotonic()
        with self._lock:
            for rule in self._rules:
                if rule.opened is None and matches(rule):
                    rule.opened = now
        return self._fire(lambda rule: rule.action != REFUSE and matches(rule))

    def _fire(self, matches):
        now = time.monotonic()
        with self._lock:
            for rule in self._rules:
                if not rule.open_at(now) or not matches(rule):
                    continue
                if rule.times is not None and rule.hits >= rule.times:
                    continue
                if rule.share < 1.0 and rule._random.random() >= rule.share:
                    continue
                rule.hits += 1
                return rule
        return None
