"""Installs the peers of the compat tier (tests/compat), tf.Transform 1.21 and TFDV 1.16.1, each
in a venv of its own under .venv-peers/, side by side, and records per peer whether it worked.

    python3 scripts/install_peers.py [--peers tft,tfdv]

Standard library only: it runs before this repo's venv exists (.ci/run starts it in the
background, beside that venv's install). Each peer gets `.venv-peers/NAME/` (its venv),
`.venv-peers/NAME.log` (pip's output) and `.venv-peers/NAME.json`: {"ok", "reason" (why not:
pip's last error line, or the step that ran out of time), "python", "versions", "seconds",
"requirements", "downloads", "downloaded" (the files downloaded beside the venv), "download_reason"}. The tier reads the JSON: it runs a peer's tests where "ok" is true and skips
them, printing the reason, where it is false. A peer whose venv was made by the same
requirements and Python, and works, is kept as it is. Exits 0 whatever the peers did (their
JSON says it), 2 on a usage error.
"""

import json
import os
import shutil
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS_DIR = os.path.join(REPO, ".venv-peers")

# Each peer: what it is, pip's arguments (one install: pip resolves them together), the
# modules whose versions prove the venv works, and distributions downloaded beside it, not
# installed (`downloads_dir`).
PEERS = {
    "tft": {
        "name": "tf.Transform 1.21",
        "requirements": ["tensorflow-transform==1.21.0"],
        "modules": ["tensorflow_transform", "apache_beam", "tensorflow"],
        # TFX's wheel: its example pipelines' module files and data (scripts/example_pipelines.py).
        "downloads": ["tfx==1.21.0"],
    },
    "tfdv": {
        "name": "TFDV 1.16.1",
        # TFDV 1.16.1 needs TensorFlow 2.16; pip's resolver finds no set on its own, so every
        # pin of the set that installs is given.
        "requirements": [
            "tensorflow-data-validation==1.16.1",
            "tfx-bsl==1.16.1",
            "tensorflow-metadata==1.16.1",
            "tensorflow==2.16.2",
            "tensorflow-serving-api==2.16.1",
            "apache-beam[gcp]==2.59.0",
            "pyarrow==10.0.1",
            "numpy==1.26.4",
            "pandas==1.5.3",
            "protobuf==4.25.9",
            "grpcio==1.62.3",
            "grpcio-status==1.62.3",
            "absl-py==1.4.0",
        ],
        "modules": ["tensorflow_data_validation", "apache_beam", "tensorflow"],
    },
}

# Seconds per step, far above what each took on a 2-core machine (the install: about 3
# minutes): a step past it has hung (a stalled download), and the peer is recorded as failed.
TIMEOUTS = {"venv": 120, "pip upgrade": 300, "pip install": 1500, "import check": 300, "download": 300}


def python_path(peer):
    return os.path.join(PEERS_DIR, peer, "bin", "python")


def downloads_dir(peer):
    """Where `peer`'s downloads are (inside its venv: made and removed with it)."""
    return os.path.join(PEERS_DIR, peer, "downloads")


def status_path(peer):
    return os.path.join(PEERS_DIR, peer + ".json")


def installing_path(peer):
    """Where the installer's pid stands while it installs `peer`: the tier waits for it
    (.ci/run runs the suite beside the install)."""
    return os.path.join(PEERS_DIR, peer + ".installing")


def last_error(output):
    """pip's last ERROR line, else the last line that says anything."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    return (errors or lines or ["no output"])[-1]


def run_step(step, command, log_path, env=None):
    """Runs one step, its output appended to `log_path` as it comes; returns None, or why it failed."""
    with open(log_path, "ab") as log:
        log.write(("$ %s\n" % " ".join(command)).encode())
        log.flush()
        start = log.tell()
        try:
            status = subprocess.run(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=TIMEOUTS[step], env=env
            ).returncode
        except subprocess.TimeoutExpired:
            return "%s did not finish in %d s" % (step, TIMEOUTS[step])
    if status:
        with open(log_path, "rb") as log:
            log.seek(start)
            return "%s exited %d: %s" % (step, status, last_error(log.read().decode(errors="replace")))
    return None


VERSIONS = "versions: "


def versions_check(modules):
    return "import json; print(%r + json.dumps({m: __import__(m).__version__ for m in %r}))" % (VERSIONS, modules)


def current(peer, spec, interpreter):
    """The recorded status of `peer`, if it was installed by `spec` with `interpreter` and still imports."""
    try:
        with open(status_path(peer)) as f:
            status = json.load(f)
    except (OSError, ValueError):
        return None
    if not status.get("ok") or status.get("requirements") != spec["requirements"]:
        return None
    if status.get("base_python") != interpreter:
        return None
    try:
        check = subprocess.run(
            [python_path(peer), "-c", versions_check(spec["modules"])],
            capture_output=True,
            timeout=TIMEOUTS["import check"],
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return status if check.returncode == 0 else None


def writing_bytecode():
    """This environment, but with Python writing the bytecode of what it imports."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def install(peer, interpreter):
    """Makes `peer`'s venv and writes its status; returns the status."""
    spec = PEERS[peer]
    kept = current(peer, spec, interpreter)
    if kept:
        return with_downloads(peer, dict(kept, kept=True))
    venv = os.path.join(PEERS_DIR, peer)
    shutil.rmtree(venv, ignore_errors=True)
    if os.path.exists(status_path(peer)):
        os.unlink(status_path(peer))
    pip = [python_path(peer), "-m", "pip", "--disable-pip-version-check"]
    steps = [
        ("venv", [interpreter, "-m", "venv", venv]),
        # TFDV's pins resolve only with a newer pip than some Pythons' venvs bring.
        ("pip upgrade", pip + ["install", "--quiet", "--upgrade", "pip"]),
        # --no-compile: pip's bytecode of every module (25 of its 48 core-seconds for
        # tf.Transform) is left to the imports, which compile only the modules they use.
        ("pip install", pip + ["install", "--no-compile"] + spec["requirements"]),
        ("import check", [python_path(peer), "-c", versions_check(spec["modules"])]),
    ]
    # The import check writes the bytecode of what the tier's peer processes import, even
    # where PYTHONDONTWRITEBYTECODE is set: without it each of them compiled it all again
    # (tf.Transform and Beam: 12 CPU-s an import, 4.2 to 4.7 with their bytecode).
    envs = {"import check": writing_bytecode()}
    start = time.monotonic()
    log_path = os.path.join(PEERS_DIR, peer + ".log")
    open(log_path, "w").close()
    for step, command in steps:
        reason = run_step(step, command, log_path, envs.get(step))
        if reason:
            break
    versions = {}
    if not reason:
        with open(log_path, errors="replace") as log:
            printed = [line for line in log if line.startswith(VERSIONS)]
        versions = json.loads(printed[-1][len(VERSIONS) :])
    status = {
        "peer": spec["name"],
        "ok": reason is None,
        "reason": reason,
        "python": python_path(peer),
        "base_python": interpreter,
        "versions": versions,
        "seconds": round(time.monotonic() - start, 1),
        "requirements": spec["requirements"],
    }
    return with_downloads(peer, status) if status["ok"] else write_status(peer, status)


def write_status(peer, status):
    """Writes `status` as `peer`'s (whether this run kept the venv is this run's, not the status')."""
    with open(status_path(peer) + ".tmp", "w") as f:
        json.dump({key: value for key, value in status.items() if key != "kept"}, f, indent=1)
    os.replace(status_path(peer) + ".tmp", status_path(peer))  # whole, or absent: the tier reads it
    return status


def with_downloads(peer, status):
    """`status` of `peer`'s working venv with its downloads, fetched where missing, and writes it:
    "downloaded" (their files), "download_reason" (why not, or None). A download that fails
    leaves the venv's tests to run: only the tests that read the download skip."""
    spec = PEERS[peer]
    want = spec.get("downloads", [])
    reason = None
    kept = status.get("downloads") == want and all(os.path.exists(path) for path in status.get("downloaded", []))
    if want and not kept:  # a kept venv's downloads, there still, are not asked of the registry again
        pip = [python_path(peer), "-m", "pip", "--disable-pip-version-check", "download", "--no-deps"]
        command = pip + ["--only-binary", ":all:", "--dest", downloads_dir(peer)] + want
        reason = run_step("download", command, os.path.join(PEERS_DIR, peer + ".log"))
    folder = downloads_dir(peer)
    downloaded = [] if reason or not want else sorted(os.path.join(folder, name) for name in os.listdir(folder))
    return write_status(peer, dict(status, downloads=want, downloaded=downloaded, download_reason=reason))


def main(argv):
    peers = list(PEERS)
    if argv[1:2] == ["--peers"] and len(argv) == 3:
        peers = argv[2].split(",")
    elif len(argv) > 1:
        sys.exit(__doc__)
    unknown = sorted(set(peers) - set(PEERS))
    if unknown:
        print("install_peers.py: no peer %s (peers: %s)" % (", ".join(unknown), ", ".join(PEERS)), file=sys.stderr)
        return 2
    os.makedirs(PEERS_DIR, exist_ok=True)
    interpreter = sys.executable
    results = {}

    for peer in peers:  # before any work, so that a test asking at once waits for its peer
        with open(installing_path(peer), "w") as f:
            f.write(str(os.getpid()))

    def one(peer):
        try:
            results[peer] = install(peer, interpreter)
        except Exception as e:  # recorded, so that the tier says why rather than finding no status
            results[peer] = {
                "peer": PEERS[peer]["name"],
                "ok": False,
                "seconds": 0,
                "reason": "install_peers.py: %r" % e,
            }
            with open(status_path(peer), "w") as f:
                json.dump(results[peer], f, indent=1)
        finally:
            os.unlink(installing_path(peer))

    # Side by side: each install mostly waits on downloads and unpacking.
    threads = [threading.Thread(target=one, args=(peer,)) for peer in peers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for peer in peers:
        status = results[peer]
        if status.get("kept"):
            print("%s: kept (%s)" % (status["peer"], status["python"]))
        elif status["ok"]:
            print("%s: installed in %.0f s (%s)" % (status["peer"], status["seconds"], status["python"]))
        else:
            print("%s: not installed, after %.0f s: %s" % (status["peer"], status["seconds"], status["reason"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
