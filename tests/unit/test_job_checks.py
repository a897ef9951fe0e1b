"""What a job is checked for when it is named or made, before anything runs: unknown
jobs, bad patterns and settings, a map over whole pieces outside TFRecord jobs, stats'
options; and a per-key fold of a file's batches, whatever their sizes, run here."""

import collections
import random

import pytest
import tensorflow as tf

import tf2_mapreduce as mr
from tf2_mapreduce import jobs
from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.inputs.files import Files


@pytest.mark.parametrize(
    "name, pattern, message",
    [
        (
            "nope",
            None,
            "--job=nope: unknown job (built in: grep, linecount, longestline, recordcount, reshard, stats, transform, vocab, wc, wordcount, wordfreq;",
        ),
        ("grep", None, "--job=grep needs --pattern"),
        ("grep", "a(", "--pattern 'a(': not a valid RE2 regular expression"),
        ("wordcount", "x", "--pattern is only for --job=grep"),
        ("no_such_module_x:JOB", None, "cannot import no_such_module_x"),
        ("json:dumps", None, "json.dumps is not a tf2_mapreduce Job"),
    ],
)
def test_job_names_are_checked(name, pattern, message):
    with pytest.raises(UsageError) as error:
        jobs.resolve(name, {"pattern": pattern}).prepared(Files([], [], []))  # a pattern: when prepared
    # The CLI names its flags; Python callers see the names of the settings.
    assert message in error.value.cli_message()
    assert message.replace("--", "") in str(error.value)


@pytest.mark.parametrize(
    "source, said",
    [
        ("import os\nx = undefined_name\n", "NameError: name 'undefined_name' is not defined ({path} line 2)"),
        ("def f(:\n", "SyntaxError: "),
        ("raise RuntimeError('no config here')\n", "RuntimeError: no config here ({path} line 1)"),
    ],
)
def test_a_users_module_that_fails_at_import_is_one_line_naming_its_line(tmp_path, monkeypatch, source, said):
    name = "broken_user_module_%d" % len(source)
    path = tmp_path / (name + ".py")
    path.write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    from tf2_mapreduce.jobs.transform import function_of

    for call, flag in ((lambda: jobs.resolve(name + ":JOB", {}), "job"), (lambda: function_of(name + ":fn"), None)):
        with pytest.raises(UsageError) as error:
            call()
        message = str(error.value)
        assert "cannot import %s: %s" % (name, said.format(path=path)) in message and "\n" not in message
        assert flag is None or message.startswith("job=")


def test_a_job_mapping_whole_pieces_is_checked_when_made():
    reducer = mr.Stats().reducer
    with pytest.raises(ValueError, match="map_input must be 'batch' or 'dataset', not 'file'"):
        mr.Job(name="j", map_fn=len, reducer=reducer, records="tfrecord", map_input="file")
    with pytest.raises(ValueError, match="is for jobs over TFRecord files"):
        mr.Job(name="j", map_fn=len, reducer=reducer, map_input="dataset")


def test_stats_options_are_checked_before_anything_runs():
    with pytest.raises(UsageError, match=r"features: user_id:int64: statistics read each feature's type"):
        mr.Stats("user_id:int64")
    with pytest.raises(UsageError, match=r"features is only for job=stats or vocab"):
        from tf2_mapreduce import jobs

        jobs.check("wordcount", {"features": "a"})


WORDS = mr.KeySum(unit="words")


def test_a_streamed_files_keys_fold_to_their_counts_whatever_the_batches():
    # The fold combines its batches only once they outgrow what it combined before: every
    # key must come out once, with its count, after any run of batches, folded as a map step
    # folds a file's batches: a dataset's reduce, in a function.
    rng = random.Random(17)

    @tf.function
    def folded(batches):
        dataset = tf.data.Dataset.from_tensor_slices(batches)
        return WORDS.finish(dataset.reduce(WORDS.start(), WORDS.add))

    for sizes in ([], [5], [1, 1, 1, 1, 50], [300, 2, 2, 2, 2, 2, 400, 7], [40] * 30, [0, 3, 0]):
        oracle, batches = collections.Counter(), []
        for size in sizes:
            batches.append([b"k%d" % rng.randint(0, 120) for _ in range(size)])
            oracle.update(batches[-1])
        flat = [key for batch in batches for key in batch]
        keys, counts = folded(
            tf.RaggedTensor.from_row_lengths(tf.constant(flat, tf.string), tf.constant(sizes, tf.int64))
        )
        assert sorted(zip(keys.numpy().tolist(), counts.numpy().tolist())) == sorted(oracle.items()), sizes
