"""An output directory holds one job's complete result: a second job's replaces the first
whole, a rerun with fewer features leaves none of the files it no longer writes, a
directory of other files is refused, and so is a second writer while one writes. And a
feature that no example holds is an error naming the features there are, unless marked
as one that may be absent ("name?")."""

import json
import os

import pytest
import tensorflow as tf

import tf2_mapreduce as mr
from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.outputs.directory import LOCK, MANIFEST, ResultDirectory


def example(**features):
    feature = {}
    for name, values in features.items():
        if isinstance(values[0], bytes):
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
        else:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("shard") / "part-0.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for n in range(60):
            writer.write(example(query=[b"q%d" % (n % 7)], tags=[b"t%d" % (n % 3), b"x"], user_id=[n % 11]))
    return path


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    path = tmp_path_factory.mktemp("text") / "a.txt"
    path.write_bytes(b"the cat sat on the mat\nthe end\n")
    return str(path)


@pytest.fixture(scope="module")
def results(inprocess, shard, text):
    """Results of a run each, written by the tests as often as they like: a result's state
    stays on the ps tasks until the cluster closes."""
    return {
        "vocab query,tags": inprocess.run(mr.Vocab("query,tags"), [shard]),
        "vocab query": inprocess.run(mr.Vocab("query"), [shard]),
        "wordfreq": inprocess.run(mr.WordFreq(), [text]),
        "stats": inprocess.run(mr.Stats(), [shard]),
    }


def listing(directory):
    """What is in `directory`: a result's files, and no lock once its writer let go."""
    return sorted(os.listdir(directory))


def manifest(directory):
    with open(os.path.join(directory, MANIFEST), encoding="utf-8") as f:
        return json.load(f)


def test_a_second_job_replaces_the_first_result_whole(results, tmp_path):
    out = str(tmp_path / "out")
    results["vocab query,tags"].write_dir(out)
    first = listing(out)
    assert {"vocab_query.txt", "vocab_tags.txt", "summary.json", MANIFEST} <= set(first)
    assert manifest(out)["files"] == [name for name in first if name != MANIFEST]
    results["wordfreq"].write_dir(out)
    assert listing(out) == sorted(
        ["vocab_words.txt", "counts_words.tsv", "unwritable_words.tsv", "summary.json", MANIFEST]
    )
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
        assert json.load(f)["job"] == "wordfreq"
    assert manifest(out)["job"] == "wordfreq"


def test_a_rerun_with_fewer_features_leaves_none_of_the_old_files(results, tmp_path):
    out = str(tmp_path / "out")
    results["vocab query,tags"].write_dir(out)
    results["vocab query"].write_dir(out)
    assert not any("tags" in name for name in listing(out))
    assert set(manifest(out)["files"]) == set(listing(out)) - {MANIFEST}
    results["stats"].write_dir(out)
    assert listing(out) == sorted(["stats.pb", "stats.json", "stats.html", MANIFEST])


def test_a_directory_of_other_files_is_refused_and_left_as_it_was(results, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    result = results["vocab query"]
    with pytest.raises(
        UsageError, match=r"output_dir .*out: holds files that are not a tf2_mapreduce result \(notes.txt\)"
    ):
        result.write_dir(str(out))
    assert listing(str(out)) == ["notes.txt"]


def test_a_second_writer_is_refused_while_one_writes(results, tmp_path):
    out = str(tmp_path / "out")
    result = results["vocab query"]
    with ResultDirectory(out):
        with pytest.raises(UsageError, match=r"output_dir .*out: another job is writing it: \S+ pid %d" % os.getpid()):
            result.write_dir(out)
    result.write_dir(out)  # released: written
    assert "vocab_query.txt" in listing(out)


def test_a_directory_made_for_a_result_never_written_is_removed_and_one_given_is_kept(tmp_path):
    made, given = tmp_path / "made", tmp_path / "given"
    given.mkdir()
    for path in (made, given):
        with ResultDirectory(str(path)):  # then the job fails before its result is written
            assert os.listdir(path) == [LOCK]
    assert not made.exists() and listing(str(given)) == []


def test_a_lock_file_removed_under_a_job_about_to_lock_it_locks_nothing(tmp_path, monkeypatch):
    """The first holder lets go (removing the file) between the second's open and flock:
    the second then holds the file now in the directory, so a third is refused."""
    from tf2_mapreduce.outputs import locks

    out = str(tmp_path / "out")
    first = ResultDirectory(out)
    first.claim()
    real_flock = locks.fcntl.flock
    calls = []

    def flock(fd, operation):
        calls.append(fd)
        if len(calls) == 1:
            first.release()
        return real_flock(fd, operation)

    monkeypatch.setattr(locks.fcntl, "flock", flock)
    second = ResultDirectory(out)
    second.claim()
    assert len(calls) == 2  # the file it first locked was gone: it locked the new one
    monkeypatch.setattr(locks.fcntl, "flock", real_flock)
    with pytest.raises(UsageError, match="another job is writing it"):
        ResultDirectory(out).claim()
    second.release()
    assert not os.path.exists(out)


def test_what_a_writer_that_died_left_aside_is_removed_and_the_old_result_kept(results, tmp_path):
    out = str(tmp_path / "out")
    result = results["vocab query"]
    result.write_dir(out)
    before = {name: open(os.path.join(out, name), "rb").read() for name in listing(out)}
    os.makedirs(os.path.join(out, ".tf2_mapreduce-staging-0123456789ab"))
    with open(os.path.join(out, ".tf2_mapreduce-staging-0123456789ab", "vocab_query.txt"), "w") as f:
        f.write("half")

    def fails(staging):
        raise OSError("the disk is full")

    with pytest.raises(OSError), ResultDirectory(out) as directory:
        directory.write(fails, "vocab")
    assert {
        name: open(os.path.join(out, name), "rb").read() for name in listing(out) if not name.startswith(".")
    } == before
    result.write_dir(out)
    assert not [name for name in os.listdir(out) if name.startswith(".")]


def test_a_feature_no_example_holds_is_named_with_those_there_are(inprocess, shard):
    with pytest.raises(UsageError) as raised:
        inprocess.run(mr.Stats("query,quary"), [shard])
    assert str(raised.value).startswith(
        "features: quary is in none of the 60 examples (features there: query, user_id, tags); "
        "mark a feature that may be absent with ? (quary?)"
    )
    with pytest.raises(UsageError, match=r"features: nope is in none of the 60 examples \(features there: "):
        inprocess.run(mr.Vocab("query,nope:string"), [shard])


def test_a_feature_marked_optional_may_be_in_no_example(inprocess, shard, tmp_path):
    stats = inprocess.run(mr.Stats("query,nope?"), [shard])
    assert stats.features["nope"].type is None and stats.features["query"].num_present == 60
    vocab = inprocess.run(mr.Vocab("query,nope?:string"), [shard])
    summary = vocab.write_dir(str(tmp_path / "vocab"))
    assert summary["vocabularies"]["nope"]["distinct"] == 0 and summary["vocabularies"]["nope"]["missing"] == 60
    assert summary["vocabularies"]["query"]["distinct"] == 7
