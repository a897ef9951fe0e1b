"""What the compat tier's tests share: each peer's Python, as scripts/install_peers.py recorded it
(the test skipped, naming the peer and why, where it could not be installed), peer processes, and
a peer's findings made once per run for every xdist worker."""

import fcntl
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from helpers.processes import SCRIPTS, die_with_the_tests

# The tier runs the scripts' own comparisons (compare_tft, compare_tfdv) on the bench's tf.Transform
# pipeline (benchmarks/tf_transform.py), and reads what install_peers recorded where it says it
# writes it: one code for both.
if SCRIPTS not in sys.path:
    sys.path.append(SCRIPTS)

import install_peers  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def _installer_of(peer):
    """The pid of the live scripts/install_peers.py installing `peer`, or None."""
    try:
        with open(install_peers.installing_path(peer)) as f:
            pid = int(f.read())
        os.kill(pid, 0)
    except (OSError, ValueError):  # none, or one killed before it could say it was done
        return None
    return pid


def peer_python(peer):
    """The Python of `peer`'s venv, once installed; skips the test where the peer could not
    be installed. Blocks while scripts/install_peers.py installs it: .ci/run runs the suite
    beside the install, whose every step has a time-out of its own."""
    while _installer_of(peer) is not None:
        time.sleep(1)  # polls the installer's marker: it removes it once the status is written
    path = install_peers.status_path(peer)
    if not os.path.exists(path):
        why = "%s: not installed, no .venv-peers/%s.json (python3 scripts/install_peers.py installs it)" % (
            install_peers.PEERS[peer]["name"],
            peer,
        )
        if os.environ.get("CI"):  # .ci/run installs them: a status missing there is its bug, not a machine's limit
            pytest.fail(why)
        pytest.skip(why)
    with open(path) as f:
        status = json.load(f)
    if not status["ok"]:
        pytest.skip("%s could not be installed: %s (.venv-peers/%s.log)" % (status["peer"], status["reason"], peer))
    return status["python"]


def peer_download(peer):
    """The file of `peer`'s one download ("name==version") beside its venv (call once
    `peer_python(peer)` has returned); skips the test, saying why, where it could not be
    downloaded (fails it in CI)."""
    with open(install_peers.status_path(peer)) as f:
        status = json.load(f)
    (requirement,) = install_peers.PEERS[peer]["downloads"]
    name, version = requirement.split("==")
    prefix = "%s-%s-" % (name.replace("-", "_"), version)
    found = [p for p in status.get("downloaded", []) if os.path.basename(p).startswith(prefix) and os.path.exists(p)]
    if not found:
        why = "%s: %s not downloaded beside it: %s (python3 scripts/install_peers.py downloads it)" % (
            install_peers.PEERS[peer]["name"],
            requirement,
            status.get("download_reason") or "no file",
        )
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return found[0]


def run_peer(python, args, log_path, timeout):
    """Runs `python args` (a peer's Python) to the end within `timeout` s, its output in
    `log_path` and its working directory that of `log_path` (what it may leave stays out of the
    checkout); fails the test with the output's tail if it exits non-zero or runs out of time.
    The process and whatever it started are killed and reaped either way."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    env.pop("PYTHONPATH", None)  # the peer's venv alone: not this repo's package
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # what one peer process compiles, the next reads
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [python, *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=os.path.dirname(os.path.abspath(log_path)),
            start_new_session=True,  # its own group: Beam's workers go with it
            preexec_fn=die_with_the_tests,
        )
    try:
        status = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        status = None
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    if status == 0:
        return
    with open(log_path, "rb") as f:
        tail = f.read().decode(errors="replace").splitlines()[-40:]
    what = "ran out of %d s" % timeout if status is None else "exited %d" % status
    pytest.fail("%s %s %s; %s ends:\n%s" % (python, " ".join(args[:2]), what, log_path, "\n".join(tail)))


def made_once(tmp_path_factory, worker_id, name, make, timeout):
    """`make()`'s result (JSON), made once per test run: xdist hands a module's tests to either
    worker, and each would run a module fixture (a peer's minute) again. The first worker to ask
    makes it; another waits for it, up to `timeout` s, then reads it. Where `make` fails, the
    next to ask makes it again (and fails as it did)."""
    if worker_id == "master":  # one process: no other to share with
        return json.loads(json.dumps(make()))
    root = tmp_path_factory.getbasetemp().parent  # the run's, above each worker's own
    path = root / (name + ".json")
    with open(root / (name + ".lock"), "w") as lock:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail("%s: another worker held its lock for %d s" % (name, timeout))
                time.sleep(0.5)  # polls the lock: a blocking flock could not be given up on
        if path.exists():
            return json.loads(path.read_text())
        made = json.dumps(make())
        path.write_text(made)
        return json.loads(made)
