"""The Python API, called as users call it: README's "From Python" example run as
written, with nothing on stderr, and a script driving a real multi-process cluster through `Cluster`: several
jobs in a row, a cancelled job resumed, skipped inputs, typed errors. Every result is
checked against plain Python (bytes.split(), Counter); each script runs in a process of
its own, since TensorFlow lets a process connect to one cluster in its life."""

import collections
import json
import os
import re
import subprocess
import sys

from helpers.corpora import write_corpus, write_zipf_corpus
from helpers.oracles import oracle_counter
from helpers.processes import REPO, ConfiguredCluster, user_env, wait_serving

from tf2_mapreduce.outputs import files as output

SCRIPT_TIMEOUT = 300


def readme_example():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    section = readme[readme.index("## From Python") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readmes_python_example_runs_as_written(tmp_path):
    run = subprocess.run(
        [sys.executable, "-c", readme_example()],
        cwd=str(tmp_path),
        env=user_env(),
        capture_output=True,
        timeout=SCRIPT_TIMEOUT,
    )
    assert run.returncode == 0, run.stderr.decode(errors="replace")[-3000:]
    assert run.stderr == b"", run.stderr.decode(errors="replace")
    oracle = oracle_counter(sorted(str(p) for p in (tmp_path / "tiny").iterdir()))
    assert len(oracle) > 10 and max(oracle.values()) > 2
    lines = run.stdout.decode().splitlines()
    assert lines[0] == "%d words, %d distinct" % (sum(oracle.values()), len(oracle))
    vocabulary = [w for w, c in sorted(oracle.items(), key=lambda kv: (-kv[1], kv[0])) if c >= 2][:100]
    expected = [vocabulary.index(w.encode()) + 1 if w.encode() in vocabulary else 0 for w in ("the", "count", "zebra")]
    assert lines[1] == str([expected])
    with open(tmp_path / "tiny_vocab.tsv", encoding="utf-8") as f:
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


# TensorFlow's teardown can take seconds once the interpreter began to finalize (under
# load, one "Failed to remove function remotely" after another, each a connection to a
# server gone). Here that stretch lasts until every thread of tf2_mapreduce's running at
# the script's end has come back from TensorFlow and ended: one that comes back during it,
# a daemon the interpreter did not wait for, aborts the process. Thread objects cannot
# tell (a finalizing interpreter deletes its daemon threads' states first), so the
# kernel's list of this process's threads is asked.
ENDS_IN_A_SLOW_TEARDOWN = """
import os, sys, threading, time
import tf2_mapreduce as mr
from tf2_mapreduce.cluster import channel

class SlowTeardown:
    def __init__(self, threads):
        self.tasks = ["/proc/self/task/%d" % thread.native_id for thread in threads]
        # What a thread of ours can spend in one of TensorFlow's calls: a session's
        # close, or a send (SEND_TIMEOUT each), with a margin.
        self.deadline = time.monotonic() + 3 * channel.SEND_TIMEOUT
        self.exists, self.now, self.sleep = os.path.exists, time.monotonic, time.sleep

    # A global of __main__: collected once the interpreter finalizes, when the module's
    # other globals may already be None (so it uses none).
    def __del__(self):
        while any(self.exists(task) for task in self.tasks) and self.now() < self.deadline:
            self.sleep(0.05)  # polls the kernel's list of threads

with mr.Cluster.local(1, 1, processes=True) as cluster:
    total = cluster.run(mr.WordCount(), [sys.argv[1]]).total
    # Left running as the block ends: leaving it cancels the job and waits for its end.
    running = cluster.submit(mr.WordCount(), [sys.argv[2]], max_pieces=1, progress_every=0.1)
    while running.progress() is None or running.progress().files_done < 10:
        time.sleep(0.05)  # polls the job's progress, updated every 0.1 s
ended = running.done()
try:
    running.wait()
    outcome = "finished"
except mr.Cancelled:
    outcome = "cancelled"
left = [t for t in threading.enumerate() if t.name.startswith("tf2_mapreduce")]
print(total, ended, outcome, sorted(t.name for t in left), flush=True)
teardown = SlowTeardown(left)
"""


def test_a_script_whose_interpreter_finalizes_slowly_exits_0_after_its_cluster_told_the_servers(tmp_path):
    """The abort a loaded run showed (SIGABRT after a correct result, "terminate called
    after throwing an instance of ''", "FATAL: exception not rethrown"): sessions to the
    told servers closed in daemon threads, still in TensorFlow while it tore down; and a
    job left running as the script leaves its cluster, whose thread would be there too."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"a b c\nd e a\n")
    many = tmp_path / "many"
    write_corpus(str(many), 2000, seed=3, max_words=20)
    run = subprocess.run(
        [sys.executable, "-c", ENDS_IN_A_SLOW_TEARDOWN, str(corpus), str(many)],
        env=user_env(),
        capture_output=True,
        timeout=SCRIPT_TIMEOUT,
    )
    stderr = run.stderr.decode(errors="replace")
    assert run.returncode == 0, stderr[-3000:]
    assert "FATAL" not in stderr and "terminate called" not in stderr, stderr[-3000:]
    assert run.stdout.decode().split(" ", 3)[:3] == ["6", "True", "cancelled"], run.stdout
