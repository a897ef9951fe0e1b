"""Re-measures what TensorFlow's gs:// client does when Cloud Storage fails (docs/runtime.md,
G6-G11), against the tests' server on loopback failing by rule: prints what was seen, PASS or
FAIL per fact; exit status 1 if any differs. About 20 s (four processes import TensorFlow)."""

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))

# The settings a process is measured with: TensorFlow's own, the package's (cluster.spec.TASK_ENV),
# and the tests' (helpers/gcs_server.py: two retries at once).
SETTINGS = {
    "tensorflow": {},
    "ours": {"GCS_RETRY_CONFIG_INIT_DELAY_TIME_US": "100000"},
    "tests": {"GCS_RETRY_CONFIG_INIT_DELAY_TIME_US": "0", "GCS_RETRY_CONFIG_MAX_RETRIES": "2"},
}


def _server(settings):
    """The test server with one object, and this process set to reach it (before TF's gs://
    file system is made, which reads its settings once)."""
    from helpers.gcs_server import GcsServer

    server = GcsServer(tempfile.mkdtemp(prefix="tf2_mapreduce-measure-"))
    server.create_bucket("m")
    server.put("m", "d/a.txt", b"one two three\n" * 1000)
    env = server.env(os.environ)
    for name in ("GCS_RETRY_CONFIG_INIT_DELAY_TIME_US", "GCS_RETRY_CONFIG_MAX_RETRIES"):
        env.pop(name, None)
    os.environ.clear()
    os.environ.update(env, **SETTINGS[settings])
    return server


def _caught(fn):
    try:
        return "ok: %r" % (fn(),)
    except Exception as e:  # noqa: BLE001 - what the call raises is the measurement
        message = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", str(e)).splitlines()[0][:120]
        return "%s: %s" % (type(e).__name__, message)


def probe_retry_wait():
    """G6: seconds one read takes when its first request is answered 503."""
    from helpers.storage_faults import STATUS, Fault

    server = _server(sys.argv[2])
    import tensorflow as tf

    tf.io.gfile.stat("gs://m/d/a.txt")  # made and cached: the read alone is timed
    server.faults.add(Fault(STATUS, kinds=("read",), status=503, times=1))
    started = time.monotonic()
    tf.io.read_file("gs://m/d/a.txt")
    return {"seconds": time.monotonic() - started}


def probe_faults():
    """G7-G10, with the tests' settings: what reaches a caller when the retries run out."""
    from helpers.storage_faults import STATUS, Fault

    server = _server("tests")
    import tensorflow as tf
    from tensorflow.python.lib.io import _pywrap_file_io

    seen = {}

    def faulty(name, fault, fn):
        server.faults.clear()
        server.faults.add(fault)
        seen[name] = _caught(fn)
        server.faults.clear()

    for status in (503, 429, 500, 403, 404):
        faulty(
            "read %d" % status, Fault(STATUS, kinds=("read",), status=status), lambda: tf.io.read_file("gs://m/d/a.txt")
        )
    listing = Fault(STATUS, kinds=("list",), status=503)
    faulty("walk", listing, lambda: list(tf.io.gfile.walk("gs://m/d")))
    faulty("isdir", listing, lambda: tf.io.gfile.isdir("gs://m/d"))
    faulty("listdir", listing, lambda: tf.io.gfile.listdir("gs://m/d"))
    faulty("GetChildren", listing, lambda: _pywrap_file_io.GetChildren("gs://m/d"))
    index = Fault(STATUS, kinds=("read", "stat"), objects="m/ckpt/checkpoint", status=503)
    server.put("m", "ckpt/checkpoint", b'model_checkpoint_path: "ckpt-1"\nall_model_checkpoint_paths: "ckpt-1"\n')
    server.put("m", "ckpt/ckpt-1.index", b"")
    checkpoint = tf.train.Checkpoint(v=tf.Variable(1))
    faulty("CheckpointManager", index, lambda: tf.train.CheckpointManager(checkpoint, "gs://m/ckpt", 3).checkpoints)
    server.faults.add(Fault(STATUS, kinds=("write",), objects="m/out/*", status=503))
    written = tf.io.gfile.GFile("gs://m/out/x.txt", "w")
    written.write("x")
    seen["close"] = _caught(written.close)
    seen["close again"] = _caught(written.close)
    server.faults.clear()
    seen["object after a failed close"] = repr(server.get("m", "out/x.txt"))
    seen["close again, storage back"] = _caught(written.close)  # or its destructor would, as it likes
    flushed = tf.io.gfile.GFile("gs://m/out/y.txt", "w")
    flushed.write("y")
    server.faults.add(Fault(STATUS, kinds=("write",), objects="m/out/*", status=503))
    seen["flush"] = _caught(flushed.flush)
    server.faults.clear()
    seen["flush again"] = _caught(flushed.flush)
    uploads = len(server.writes)
    flushed.close()
    seen["uploads by close after a flush"] = len(server.writes) - uploads
    seen["object after the flush"] = (server.get("m", "out/y.txt") or b"").decode()
    return seen


def probe_writes():
    """G11, with the tests' settings and a 2 s idle time-out: uploads cut off mid-body, answers
    lost after the request was done, and stalls, on writes, renames and deletes."""
    from helpers.storage_faults import CUT, RESET, STALL, STATUS, Fault

    os.environ["GCS_REQUEST_IDLE_TIMEOUT_SECS"] = "2"
    server = _server("tests")
    import tensorflow as tf

    body = bytes(range(256)) * 1200  # 300 KB: several chunks of libcurl's upload
    seen = {}

    def written(name, faults, fn=None):
        server.faults.clear()
        for fault in faults:
            server.faults.add(fault)
        path = "gs://m/w/%s" % name.replace(" ", "-")
        f = tf.io.gfile.GFile(path, "wb")
        f.write(body)
        started = time.monotonic()
        seen[name] = _caught(fn or f.close)
        seen[name + ": seconds"] = time.monotonic() - started
        seen[name + ": hits"] = [fault.hits for fault in faults]
        server.faults.clear()
        if fn is None and not seen[name].startswith("ok"):
            seen[name + ": object"] = repr(server.get("m", "w/" + name.replace(" ", "-")))
            seen[name + ": again"] = _caught(f.close)
        seen[name + ": whole"] = server.get("m", "w/" + name.replace(" ", "-")) == body
        return path

    cut = Fault(CUT, kinds=("upload",), objects="m/w/*", after_bytes=100000, times=1)
    written("cut once", [cut])
    written("cut past the retries", [Fault(CUT, kinds=("upload",), objects="m/w/*", after_bytes=100000, times=3)])
    written("answer lost", [Fault(RESET, kinds=("write",), objects="m/w/*", after_bytes=0, times=1)])
    written("stalled 1 s", [Fault(STALL, kinds=("write",), objects="m/w/*", stall=1.0, times=1)])
    written("stalled past the idle time-out", [Fault(STALL, kinds=("write",), objects="m/w/*", stall=5.0, times=1)])
    written(
        "data stalled past the idle time-out", [Fault(STALL, kinds=("upload",), objects="m/w/*", stall=5.0, times=1)]
    )
    written("data answer lost", [Fault(RESET, kinds=("upload",), objects="m/w/*", after_bytes=0, times=1)])
    for kind in ("copy", "delete"):
        source = written("to rename, %s" % kind, [])
        lost = server.faults.add(Fault(RESET, kinds=(kind,), objects="m/w/*", after_bytes=0, times=1))
        seen["rename, %s answer lost" % kind] = _caught(lambda s=source: tf.io.gfile.rename(s, s + ".moved"))
        seen["rename, %s answer lost: hits" % kind] = lost.hits
        server.faults.clear()
        seen["rename, %s answer lost: moved" % kind] = server.get("m", source[len("gs://m/") :] + ".moved") == body
        seen["rename, %s answer lost: source" % kind] = server.get("m", source[len("gs://m/") :]) is not None
    source = written("to rename twice", [])
    server.faults.add(Fault(RESET, kinds=("delete",), objects="m/w/*", after_bytes=0, times=1))
    server.faults.add(Fault(STATUS, kinds=("delete",), objects="m/w/*", status=503, times=2))
    seen["rename, delete done unanswered, then 503s"] = _caught(
        lambda: tf.io.gfile.rename(source, source + ".moved", overwrite=True)
    )
    server.faults.clear()
    seen["the same rename again"] = _caught(lambda: tf.io.gfile.rename(source, source + ".moved", overwrite=True))
    source = written("to remove", [])
    lost = server.faults.add(Fault(RESET, kinds=("delete",), objects="m/w/*", after_bytes=0, times=1))
    seen["remove, answer lost"] = _caught(lambda: tf.io.gfile.remove(source))
    seen["remove, answer lost: hits"] = lost.hits
    server.faults.clear()
    seen["remove, answer lost: gone"] = server.get("m", source[len("gs://m/") :]) is None
    return seen


PROBES = {"retry_wait": probe_retry_wait, "faults": probe_faults, "writes": probe_writes}


def _child(probe, settings=""):
    run = subprocess.run(
        [sys.executable, os.path.abspath(__file__), probe, settings],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    if run.returncode != 0:
        sys.exit("probe %s failed:\n%s" % (probe, run.stderr[-3000:]))
    return json.loads(run.stdout.strip().splitlines()[-1])


def main():
    if len(sys.argv) > 1:
        try:
            print(json.dumps(PROBES[sys.argv[1]]()))
        except BaseException:  # noqa: BLE001 - said, then the exit below, which the server's threads would stop
            traceback.print_exc()
            os._exit(1)
        sys.stdout.flush()
        os._exit(0)
    waits = {settings: _child("retry_wait", settings)["seconds"] for settings in ("tensorflow", "ours")}
    seen = _child("faults")
    seen.update(_child("writes"))
    gave_up = "All 2 retry attempts failed"

    def given_up(text):
        return gave_up in text

    def ok(text):
        return text == "ok: None"

    def true(value):
        return value is True

    # (fact, what, the key of `seen`, what it must be)
    expected = [("G7", "read %d, retried, then" % status, "read %d" % status, None) for status in (503, 429, 500)]
    expected += [
        ("G7", "read 403, not retried", "read 403", lambda v: v.startswith("PermissionDeniedError")),
        ("G7", "read 404, not retried", "read 404", lambda v: v.startswith("NotFoundError")),
        ("G8", "gfile.walk under list 503", "walk", lambda v: v == "ok: []"),
        ("G8", "gfile.isdir under list 503", "isdir", lambda v: v == "ok: False"),
        ("G8", "gfile.listdir under list 503", "listdir", lambda v: v.startswith("NotFoundError")),
        ("G8", "GetChildren under list 503", "GetChildren", given_up),
        ("G9", "CheckpointManager, its index answered 503", "CheckpointManager", lambda v: v == "ok: []"),
        ("G10", "GFile.close, upload answered 503", "close", given_up),
        ("G10", "close again: uploads again", "close again", given_up),
        ("G10", "close again, storage back", "close again, storage back", lambda v: v == "ok: None"),
        ("G10", "the object after it", "object after a failed close", lambda v: v == "None"),
        ("G10", "GFile.flush, upload answered 503", "flush", given_up),
        ("G10", "flush again, storage back", "flush again", lambda v: v == "ok: None"),
        ("G10", "uploads by close after that flush", "uploads by close after a flush", lambda v: v == 0),
        ("G10", "the object after them", "object after the flush", lambda v: v == "y"),
        ("G11", "an upload cut mid-body once: resumed", "cut once", ok),
        ("G11", "the cut was made, once", "cut once: hits", lambda v: v == [1]),
        ("G11", "the object after it is whole", "cut once: whole", true),
        ("G11", "an upload cut past the retries", "cut past the retries", lambda v: gave_up in v and "code 52" in v),
        ("G11", "the object after it", "cut past the retries: object", lambda v: v == "None"),
        ("G11", "close again, storage back: uploads it", "cut past the retries: again", ok),
        ("G11", "the object after that is whole", "cut past the retries: whole", true),
        ("G11", "an upload's start answered, then reset", "answer lost", ok),
        ("G11", "the object after it is whole", "answer lost: whole", true),
        ("G11", "an upload's start stalled 5 s, idle time-out 2 s", "stalled past the idle time-out", ok),
        ("G11", "the object after it is whole", "stalled past the idle time-out: whole", true),
        ("G11", "an upload's data done, its answer lost", "data answer lost", ok),
        ("G11", "the answer was lost, once", "data answer lost: hits", lambda v: v == [1]),
        ("G11", "the object after it is whole", "data answer lost: whole", true),
        ("G11", "an upload's data stalled 5 s, idle time-out 2 s", "data stalled past the idle time-out", ok),
        ("G11", "given up and tried again, s", "data stalled past the idle time-out: seconds", lambda v: 2 <= v < 5),
        ("G11", "a rename, its copy's answer lost", "rename, copy answer lost", ok),
        ("G11", "the file moved", "rename, copy answer lost: moved", true),
        ("G11", "the answer was lost, once", "rename, copy answer lost: hits", lambda v: v == 1),
        ("G11", "a rename, its delete's answer lost", "rename, delete answer lost", ok),
        ("G11", "the file moved, once", "rename, delete answer lost: source", lambda v: v is False),
        ("G11", "the answer was lost, once", "rename, delete answer lost: hits", lambda v: v == 1),
        (
            "G11",
            "a rename, its delete done unanswered, then 503s",
            "rename, delete done unanswered, then 503s",
            given_up,
        ),
        ("G11", "the same rename again: no source", "the same rename again", lambda v: v.startswith("NotFoundError")),
        ("G11", "a remove, its answer lost", "remove, answer lost", ok),
        ("G11", "the file gone", "remove, answer lost: gone", true),
        ("G11", "the answer was lost, once", "remove, answer lost: hits", lambda v: v == 1),
    ]
    facts = [
        (
            "G6",
            "a read answered 503 once, TF's settings: waits 1 s + up to 1 s",
            waits["tensorflow"],
            1.0 <= waits["tensorflow"] < 2.5,
        ),
        ("G6", "the same, ours (first retry after 0.1 s + up to 1 s)", waits["ours"], 0.1 <= waits["ours"] < 1.5),
    ]
    for fact_id, what, key, holds in expected:
        holds = holds or (lambda v: v.startswith("AbortedError: " + gave_up))
        facts.append((fact_id, what, seen[key], holds(seen[key])))
    failed = 0
    for fact_id, what, shown, ok in facts:
        shown = "%.2f s" % shown if isinstance(shown, float) else shown
        print("%s  %s %s: %s" % ("PASS" if ok else "FAIL", fact_id, what, shown))
        failed += not ok
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
