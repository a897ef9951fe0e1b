"""A job's own map_fn is checked by its reducer before anything is added up: a value per
line where one per text is due, floats into an int64 sum, int keys into a per-key table
each fail the job with one line naming the job, the reducer, what map_fn returned and
what is needed, whatever on_error says; nothing is counted."""

import re

import pytest
import tensorflow as tf
from helpers.corpora import write_corpus

import tf2_mapreduce as mr
from tf2_mapreduce.errors import MapOutputError


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    directory = tmp_path_factory.mktemp("texts")
    write_corpus(str(directory), 6, seed=5, max_words=40)
    return str(directory)


def lines_of(texts):
    return tf.strings.split(texts, "\n").flat_values


def failure(cluster, job, inputs, on_error):
    with pytest.raises(MapOutputError) as raised:
        cluster.run(job, inputs, on_error=on_error)
    message = str(raised.value)
    assert "\n" not in message and message.startswith("job %s: map_fn returned " % job.name), message
    return message


CASES = [
    (
        mr.Sum("lines"),
        lambda t: tf.ones_like(lines_of(t), tf.int64),
        r"values of shape \[\d+\] for \d+ texts?, but Sum\(unit='lines'\) needs one int64 per text, shape \[n\]",
    ),
    (mr.Sum("bytes"), lambda t: tf.cast(tf.strings.length(t), tf.float32), r"float32 values, but Sum"),
    (
        mr.VectorSum(("a", "b")),
        lambda t: tf.ones([tf.size(t), 3], tf.int64),
        r"shape \(None, 3\), but VectorSum\(names=\('a', 'b'\)\) needs one int64 per text, shape \[n, 2\]",
    ),
    (mr.Max("longest", "bytes"), lambda t: tf.ones([tf.size(t) + 1], tf.int64), r"shape \[\d+\] for \d+ texts?"),
    (mr.Min("shortest", "bytes"), lambda t: tf.strings.length(t)[None], r"values of shape \(1, None\)"),
    (
        mr.KeySum("lengths"),
        lambda t: tf.strings.length(t),
        r"keys of int32, but KeySum\(unit='lengths'\) needs a 1-D tf.string",
    ),
    (mr.KeySum("words"), lambda t: tf.strings.split(t), r"a RaggedTensor, but KeySum\(unit='words'\) needs"),
    (
        mr.KeySum("words"),
        lambda t: (lines_of(t), tf.ones([1], tf.int64)),
        r"keys and counts of shapes \[\d+, 1\] for \d+ texts?, but KeySum",
    ),
    (mr.Distinct("lengths"), lambda t: tf.strings.length(t), r"keys of int32, but Distinct"),
]


@pytest.mark.parametrize("on_error", ["fail", "skip"])
@pytest.mark.parametrize(
    "reducer, map_fn, said", CASES, ids=lambda x: type(x).__name__ if isinstance(x, mr.Reducer) else None
)
def test_a_map_output_the_reducer_cannot_take_fails_the_job(inprocess, texts, reducer, map_fn, said, on_error):
    job = mr.Job(name="mine", map_fn=map_fn, reducer=reducer, autograph=False)
    message = failure(inprocess, job, [texts], on_error)
    assert re.search(said, message), message


def test_narrower_integers_are_widened_exactly(inprocess, texts):
    job = mr.Job(name="lengths", map_fn=lambda t: tf.strings.length(t), reducer=mr.Sum("bytes"), autograph=False)
    result = inprocess.run(job, [texts])
    assert result.total == result.bytes_done


def test_a_tfrecord_jobs_outputs_are_checked_per_record(inprocess, tmp_path):
    path = str(tmp_path / "r.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for n in range(5):
            writer.write(b"record %d" % n)
    per_batch = mr.Job(
        name="batches",
        map_fn=lambda r: tf.size(r, tf.int64)[None],
        reducer=mr.Sum("records"),
        records="tfrecord",
        autograph=False,
    )
    assert "for 5 records" in failure(inprocess, per_batch, [path], "skip")
    dataset_keys = mr.Job(
        name="piece_keys",
        map_fn=lambda batches: (tf.constant(["a", "b"]), tf.constant([1], tf.int64)),
        reducer=mr.KeySum("keys"),
        records="tfrecord",
        map_input="dataset",
        autograph=False,
    )
    assert "keys and counts of shapes [2, 1], but KeySum" in failure(inprocess, dataset_keys, [path], "fail")
    vocabularies = mr.Job(
        name="vocab_of_mine",
        map_fn=lambda records: (records,),
        reducer=mr.Vocabularies(features=("a",)),
        records="tfrecord",
        autograph=False,
    )
    assert "returned tuple, but Vocabularies" in failure(inprocess, vocabularies, [path], "fail")
