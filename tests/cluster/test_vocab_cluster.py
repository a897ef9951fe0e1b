"""vocab on real multi-process clusters: a stop and resume from the checkpoint, docs/jobs.md's
walkthrough run as written, the Python API on a local cluster; every vocabulary file
against records parsed one by one by protobuf (helpers.oracles.oracle_vocab) and loaded
by TensorFlow's own lookups. A killed worker: test_killed_worker.py."""

import json
import os
import re
import signal
import subprocess
import sys

from helpers.corpora import VOCAB_FEATURES as FEATURES
from helpers.oracles import assert_vocabularies, oracle_vocab, read_lines, tft_ordered
from helpers.processes import REPO, LiveCoordinator, task_env


def test_vocab_stopped_and_resumed_from_its_checkpoint(tmp_path, processes, vocab_shards):
    directory, paths, oracle = vocab_shards
    out = tmp_path / "vocab"
    args = [
        "--job=vocab",
        "--features=query:string,tags:string,user_id:int64",
        "--input",
        directory,
        "--output_dir",
        str(out),
        "--num_ps",
        "2",
        "--checkpoint_dir",
        str(tmp_path / "ckpt"),
        "--files_per_step",
        "1",
        "--progress_every",
        "0.2",
    ]
    job = LiveCoordinator(args, task_env(), processes, tmp_path / "first.log")
    job.wait_for_files(3)
    job.signal_another_thread(signal.SIGTERM)
    code, _, stderr = job.finish()
    assert code == 143, stderr
    resumed = LiveCoordinator(args, task_env(), processes, tmp_path / "second.log")
    done = int(resumed.wait_for(r"resuming from .*: (\d+) of %d files already done" % len(paths)).group(1))
    assert done >= 3
    code, _, stderr = resumed.finish()
    assert code == 0, stderr
    summary = assert_vocabularies(str(out), oracle)
    assert summary["files_resumed"] == done and summary["files"] == len(paths)


def vocab_walkthrough():
    """The commands and the Python of docs/jobs.md's vocab section, as written there."""
    with open(os.path.join(REPO, "docs", "jobs.md"), encoding="utf-8") as f:
        readme = f.read()
    section = readme[readme.index("### vocab:") : readme.index("### Vocabulary files")]
    blocks = re.findall(r"```(\w*)\n(.*?)```", section, re.S)
    return blocks[0][1], next(code for kind, code in blocks if kind == "python")


def test_the_vocab_walkthrough_of_the_docs_runs_as_written(tmp_path):
    commands, python = vocab_walkthrough()
    env = task_env(PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    shell = "cd %s && ln -s %s/scripts scripts && set -e\n%s" % (tmp_path, REPO, commands)
    run = subprocess.run(["bash", "-c", shell], env=env, capture_output=True, timeout=300)
    assert run.returncode == 0, run.stderr.decode(errors="replace")[-3000:]
    paths = sorted(str(p) for p in (tmp_path / "shards").iterdir())
    oracle = oracle_vocab(paths, FEATURES)
    printed = run.stdout.decode()
    assert "vocab: %d examples" % oracle["examples"] in printed
    for name, _ in FEATURES:
        counts = oracle["counts"][name]
        assert (
            "%s: %d values, %d distinct, %d examples without a value"
            % (
                name,
                sum(counts.values()),
                len(counts),
                oracle["missing"][name],
            )
            in printed
        )
        assert read_lines(str(tmp_path / "vocab" / ("vocab_%s.txt" % name))) == [t for t, _ in tft_ordered(counts)]
    lookup = subprocess.run([sys.executable, "-c", python], cwd=tmp_path, env=env, capture_output=True, timeout=120)
    assert lookup.returncode == 0, lookup.stderr.decode(errors="replace")[-3000:]
    first = tft_ordered(oracle["counts"]["query"])[0][0].decode()
    assert '"%s", "never seen"' % first in python  # the docs look up the most frequent query
    assert lookup.stdout.decode().split() == ["[1", "0]"]


API_SCRIPT = """
import json, sys
import tf2_mapreduce as mr
from tf2_mapreduce.jobs import features

shards, out = sys.argv[1:3]
wanted = features.detect_types("query,tags,user_id", [shards + "/part-00000.tfrecord.gz"])
with mr.Cluster.local(num_ps=2) as cluster:
    handle = cluster.submit(mr.Vocab(wanted), [shards], max_pieces=3)
    result = handle.wait(240)
    summary = result.write_dir(out, min_count=2)
    again = cluster.run(mr.RecordCount(), [shards])
print(json.dumps({"types": wanted, "total": result.total, "distinct": result.distinct,
                  "examples": summary["examples"], "records": again.total}))
"""


def test_vocab_from_the_python_api_on_a_local_cluster(tmp_path, vocab_shards):
    directory, paths, oracle = vocab_shards
    run = subprocess.run(
        [sys.executable, "-c", API_SCRIPT, directory, str(tmp_path / "vocab")],
        env=task_env(),
        capture_output=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr.decode(errors="replace")[-3000:]
    got = json.loads(run.stdout.decode().splitlines()[-1])
    assert got == {
        "types": [[*feature, False] for feature in FEATURES],
        "total": oracle["examples"],
        "distinct": sum(len(oracle["counts"][name]) for name, _ in FEATURES),
        "examples": oracle["examples"],
        "records": oracle["examples"],
    }
    assert_vocabularies(str(tmp_path / "vocab"), oracle, min_count=2)
