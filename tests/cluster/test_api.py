"""The Python API, called as users call it: README's "From Python" example run as
written, and a script driving a real multi-process cluster through `Cluster`: several
jobs in a row, a cancelled job resumed, skipped inputs, typed errors. Every result is
checked against plain Python (bytes.split(), Counter); each script runs in a process of
its own, since TensorFlow lets a process connect to one cluster in its life. Then what
`JobHandle.wait` promises of itself: its time-out, and signal handlers run while it waits."""

import collections
import json
import linecache
import os
import re
import signal
import subprocess
import sys
import threading
import time
import types

import numpy as np
import pytest
from conftest import REPO, ConfiguredCluster, oracle_counter, task_env, write_zipf_corpus
from test_failures import wait_serving

from tf2_mapreduce.outputs import files as output

SCRIPT_TIMEOUT = 300


def readme_example():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    section = readme[readme.index("## From Python") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.cluster
def test_the_readmes_python_example_runs_as_written(tmp_path):
    run = subprocess.run(
        [sys.executable, "-c", readme_example()],
        cwd=str(tmp_path),
        env=task_env(),
        capture_output=True,
        timeout=SCRIPT_TIMEOUT,
    )
    assert run.returncode == 0, run.stderr.decode(errors="replace")[-3000:]
    oracle = oracle_counter(sorted(str(p) for p in (tmp_path / "corpus").iterdir()))
    assert len(oracle) > 10 and max(oracle.values()) > 2
    lines = run.stdout.decode().splitlines()
    assert lines[0] == "%d words, %d distinct" % (sum(oracle.values()), len(oracle))
    vocabulary = [w for w, c in sorted(oracle.items(), key=lambda kv: (-kv[1], kv[0])) if c >= 2][:100]
    expected = [vocabulary.index(w.encode()) + 1 if w.encode() in vocabulary else 0 for w in ("the", "count", "zebra")]
    assert lines[1] == str([expected])
    with open(tmp_path / "vocab.tsv", encoding="utf-8") as f:
        table = [line.rstrip("\n").split("\t") for line in f]
    assert [(output.unescape(w), int(c)) for w, c in table] == sorted(oracle.items(), key=lambda kv: (-kv[1], kv[0]))


DRIVER = """
import json, sys
import tf2_mapreduce as mr

corpus, missing, checkpoints = sys.argv[1:4]
report = {}
with mr.Cluster.from_tf_config() as cluster:
    wordfreq = mr.WordFreq()
    first = cluster.run(wordfreq, [corpus])
    report["table"] = [[w.hex(), c] for w, c in first.entries()]
    report["top"] = [[w.hex(), c] for w, c in first.top(5)]
    wc = cluster.run(mr.Wc(), [corpus, missing], on_error="skip")
    report["wc"] = {"total": wc.total, "per_file": {f.path: f.value for f in wc.per_file}, "skipped": wc.skipped}
    # Cancelled from its own progress report once 20 files are done: mid-job, however fast it runs.
    submitted = []
    cancel_at_20 = lambda p: p.files_done >= 20 and submitted and submitted[0].cancel()
    handle = cluster.submit(wordfreq, [corpus], checkpoint_dir=checkpoints, max_pieces=1, progress_every=0.1,
                            on_progress=cancel_at_20)
    submitted.append(handle)
    try:
        handle.wait(120)
        report["cancelled"] = None
    except mr.Cancelled as e:
        report["cancelled"] = {"checkpoint": e.checkpoint, "message": str(e)}
    resumed = cluster.run(wordfreq, [corpus], checkpoint_dir=checkpoints)
    report["resumed"] = {"from": resumed.resumed_from, "files_resumed": resumed.files_resumed,
                         "table": [[w.hex(), c] for w, c in resumed.table().items()]}
    try:
        cluster.run(wordfreq, [missing])
    except mr.InputError as e:
        report["input_error"] = {"path": e.path, "reason": e.reason}
print(json.dumps(report))
"""


@pytest.mark.cluster
def test_a_script_runs_several_jobs_cancels_and_resumes_on_a_real_cluster(tmp_path, processes):
    corpus = str(tmp_path / "corpus")
    paths = write_zipf_corpus(corpus, 300, distinct=20_000, samples=60_000, seed=31)
    oracle = oracle_counter(paths)
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=2, num_workers=2)
    cluster.start_all()
    for role, index in cluster.tasks:
        wait_serving(cluster, role, index)
    missing = str(tmp_path / "missing.txt")
    run = subprocess.run(
        [sys.executable, "-c", DRIVER, corpus, missing, str(tmp_path / "ckpt")],
        env=cluster.chief_env(),
        capture_output=True,
        timeout=SCRIPT_TIMEOUT,
    )
    assert run.returncode == 0, run.stderr.decode(errors="replace")[-3000:]
    report = json.loads(run.stdout.decode().splitlines()[-1])

    def as_counter(table):
        return collections.Counter({bytes.fromhex(w): c for w, c in table})

    assert as_counter(report["table"]) == oracle and len(report["table"]) == len(oracle)
    assert [(bytes.fromhex(w), c) for w, c in report["top"]] == sorted(oracle.items(), key=lambda kv: (-kv[1], kv[0]))[
        :5
    ]
    contents = {}
    for path in paths:
        with open(path, "rb") as f:
            contents[path] = f.read()
    assert report["wc"]["per_file"] == {
        p: [d.count(b"\n") + (not d.endswith(b"\n") and d != b""), len(d.split()), len(d)] for p, d in contents.items()
    }
    assert report["wc"]["total"] == [sum(v[i] for v in report["wc"]["per_file"].values()) for i in range(3)]
    assert report["wc"]["skipped"] == [[missing, "no such file or directory"]]
    cancelled = report["cancelled"]
    assert cancelled and cancelled["checkpoint"].startswith(str(tmp_path / "ckpt")), report
    assert report["resumed"]["from"] == cancelled["checkpoint"] and 20 <= report["resumed"]["files_resumed"] < 300
    assert as_counter(report["resumed"]["table"]) == oracle
    assert report["input_error"] == {"path": missing, "reason": "no such file or directory"}
    # Leaving the cluster told every server that the job was over.
    assert cluster.exit_codes() == {task: 0 for task in cluster.tasks}


def test_per_file_values_are_made_as_they_are_read():
    from tf2_mapreduce.inputs.files import InputFile
    from tf2_mapreduce.reducers.base import FileValue, PerFile

    files = [InputFile("f%d" % n, 10 + n, 0) for n in range(5)]
    values = np.array([[1, 2], [3, 4], [5, 6], [7, 8], [9, 10]])
    per_file = PerFile(files, values, np.array([True, False, True, True, False]), lambda v: tuple(v.tolist()))
    assert len(per_file) == 3 and repr(per_file) == "PerFile(3 files)"
    assert per_file[0] == FileValue("f0", 10, (1, 2)) and per_file[-1] == FileValue("f3", 13, (7, 8))
    assert per_file[1:] == [FileValue("f2", 12, (5, 6)), FileValue("f3", 13, (7, 8))]
    assert [f.path for f in per_file] == ["f0", "f2", "f3"]


class _BlockedRun:
    """A run whose `run()` blocks until `release` is set, in place of a job's."""

    def __init__(self):
        self.release = threading.Event()

    def run(self):
        self.release.wait(10)
        return "result"


class _Stop(Exception):
    pass


def test_waiting_on_a_job_times_out_and_lets_signal_handlers_run():
    from tf2_mapreduce.client import JobHandle

    run = _BlockedRun()
    handle = JobHandle("blocked", None, types.SimpleNamespace(_running=run))
    handle._start(run)
    try:
        started = time.monotonic()
        with pytest.raises(TimeoutError, match="job blocked still running after 0.3s"):
            handle.wait(0.3)
        assert time.monotonic() - started >= 0.3 and not handle.done()

        # A signal handled by another thread than the main one (as the kernel may pick one
        # of TensorFlow's) runs its Python handler only when the main thread wakes.
        def stop(signum, frame):
            raise _Stop()

        previous = signal.signal(signal.SIGUSR1, stop)
        try:
            main = threading.get_ident()

            def blocked(frame):
                return frame.f_code is threading.Condition.wait.__code__ and "acquire" in linecache.getline(
                    frame.f_code.co_filename, frame.f_lineno
                )

            def send():
                while not blocked(sys._current_frames()[main]):  # until the main thread blocks in a wait
                    time.sleep(0.01)
                signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)

            sender = threading.Thread(target=send)
            with pytest.raises(_Stop):
                sender.start()
                handle.wait()
            sender.join()
        finally:
            signal.signal(signal.SIGUSR1, previous)
        assert not handle.done()
    finally:
        run.release.set()
    assert handle.wait(30) == "result" and handle.done()
