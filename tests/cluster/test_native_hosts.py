"""The native ops across a cluster of processes: every server says whether it loaded them;
a worker on a host that cannot build them (no compiler) makes every job go without them,
with one warning and the same exact result, and compressed inputs refused rather than
read short; TF2_MAPREDUCE_NATIVE=require refuses such a host, and such a cluster."""

import collections

from helpers.corpora import write_corpus
from helpers.oracles import oracle_counter
from helpers.processes import ConfiguredCluster, run_cli, wait_serving

from tf2_mapreduce.outputs import files as output


def no_compiler(tmp_path):
    """A host that cannot build the native ops: no compiler, nothing built in its cache."""
    cache = tmp_path / "empty-cache"
    cache.mkdir(exist_ok=True)
    return {"CXX": "false", "TF2_MAPREDUCE_CACHE": str(cache)}


def mixed_cluster(tmp_path, processes, *flags):
    """1 ps and 2 workers; worker 1 on a host without a compiler."""
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=1, num_workers=2)
    cluster.start("ps", 0, *flags)
    cluster.start("worker", 0, *flags)
    cluster.start("worker", 1, *flags, env=no_compiler(tmp_path))
    for role, index in cluster.tasks:
        wait_serving(cluster, role, index)
    return cluster


def test_a_worker_without_the_native_ops_gives_the_same_exact_result(tmp_path, processes):
    corpus = tmp_path / "corpus"
    paths = write_corpus(str(corpus), 24, seed=17, max_words=3000)
    cluster = mixed_cluster(tmp_path, processes, "--keep_serving")
    assert "worker 0: native ops loaded" in cluster.log("worker", 0)
    assert "worker 1: native ops not loaded (false failed: exit 1)" in cluster.log("worker", 1)
    assert "going without tf2_mapreduce's native ops (false failed: exit 1)" in cluster.log("worker", 1)
    worker_1 = cluster.addresses["worker", 1]
    warning = "warning: jobs go without tf2_mapreduce's native ops: worker 1 at %s has not loaded them" % worker_1

    packed = tmp_path / "packed.txt.gz"
    packed.write_bytes(b"\x1f\x8b")
    refused = run_cli(["--input", str(packed)], env=cluster.chief_env())
    assert refused.returncode == 2, refused.stderr
    assert "error: %s: a compressed file needs tf2_mapreduce's native ops" % packed in refused.stderr
    assert refused.stderr.count(warning) == 1

    table = str(tmp_path / "words.tsv")
    # Pieces of 4 KB: most files are read as byte ranges, by both workers.
    run = run_cli(["--job=wordfreq", "--read_size=4096", "--output", table, str(corpus)], env=cluster.chief_env())
    assert run.returncode == 0, run.stderr
    warnings = [line for line in run.stderr.splitlines() if line.startswith("tf2_mapreduce: warning:")]
    assert [line for line in warnings if "native ops" in line] == [line for line in warnings if warning in line]
    assert run.stderr.count(warning) == 1, run.stderr
    with open(table, encoding="utf-8") as f:
        counts = collections.Counter({output.unescape(w): int(c) for w, c in (line.split("\t") for line in f)})
    assert counts == oracle_counter(paths)


def test_a_ps_without_the_native_ops_gives_the_same_exact_result(tmp_path, processes):
    """Per-key tables are the native op library's where every task has it: a ps without
    it makes jobs use TensorFlow's table, said once, with the same counts."""
    paths = write_corpus(str(tmp_path / "corpus"), 12, seed=5, max_words=2000)
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=1, num_workers=1)
    cluster.start("ps", 0, env=no_compiler(tmp_path))
    cluster.start("worker", 0)
    for role, index in cluster.tasks:
        wait_serving(cluster, role, index)
    table = str(tmp_path / "words.tsv")
    run = run_cli(["--job=wordfreq", "--output", table, str(tmp_path / "corpus")], env=cluster.chief_env())
    assert run.returncode == 0, run.stderr
    warning = (
        "warning: jobs go without tf2_mapreduce's native ops: ps 0 at %s has not loaded them"
        % (cluster.addresses["ps", 0])
    )
    assert run.stderr.count(warning) == 1, run.stderr
    with open(table, encoding="utf-8") as f:
        counts = collections.Counter({output.unescape(w): int(c) for w, c in (line.split("\t") for line in f)})
    assert counts == oracle_counter(paths)


def test_require_refuses_a_cluster_with_a_worker_without_the_native_ops(tmp_path, processes):
    cluster = mixed_cluster(tmp_path, processes)
    write_corpus(str(tmp_path / "corpus"), 3, seed=1)
    run = run_cli([str(tmp_path / "corpus")], env=dict(cluster.chief_env(), TF2_MAPREDUCE_NATIVE="require"))
    assert run.returncode == 3, run.stderr
    assert (
        "error: TF2_MAPREDUCE_NATIVE=require, but worker 1 at %s has not loaded them" % cluster.addresses["worker", 1]
        in run.stderr
    )


def test_require_stops_a_server_that_cannot_build_them(tmp_path, processes):
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=1, num_workers=1)
    server = cluster.start("worker", 0, env=dict(no_compiler(tmp_path), TF2_MAPREDUCE_NATIVE="require"))
    assert server.wait(120) == 2
    assert (
        "tf2_mapreduce server: error: TF2_MAPREDUCE_NATIVE=require, but tf2_mapreduce's native ops cannot be used "
        "here: false failed: exit 1" in cluster.log("worker", 0)
    )
    assert "serving on" not in cluster.log("worker", 0)
