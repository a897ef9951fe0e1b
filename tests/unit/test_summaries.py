"""TensorBoard summaries of the progress (`outputs.summaries`): every report's figures as
scalars at its time, the job's value by the names its reducer gives it, and rates over
the last interval where the value grows; read back as TensorBoard reads them."""

import glob

import tensorflow as tf

from tf2_mapreduce.outputs.summaries import Summaries
from tf2_mapreduce.reducers import KeySum, VectorSum
from tf2_mapreduce.run.loop import Progress


def progress(seconds, files, value, distinct=None):
    return Progress(files, 4, 100 * files, 400, value, distinct, seconds, 1, (files, 2), 0)


def scalars(logdir):
    found = {}
    for path in glob.glob(str(logdir) + "/events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                number = tf.make_ndarray(value.tensor).item() if value.HasField("tensor") else value.simple_value
                found.setdefault(value.tag, []).append((event.step, round(number, 3)))
    return found


def test_every_report_is_written_with_its_rates(tmp_path):
    writer = Summaries(str(tmp_path), VectorSum(("lines", "words")))
    writer.write(progress(1.0, 1, (10, 50)))
    writer.write(progress(3.0, 3, (30, 250)))
    writer.close()
    found = scalars(tmp_path)
    assert found["progress/files_done"] == [(1000, 1), (3000, 3)]
    assert found["progress/files_fraction"] == [(1000, 0.25), (3000, 0.75)]
    assert found["progress/files_skipped"] == [(1000, 1), (3000, 1)]
    assert found["totals/words"] == [(1000, 50), (3000, 250)]
    assert found["workers/map_steps/worker_1"] == [(1000, 2), (3000, 2)]
    assert found["throughput/bytes_per_second"] == [(3000, 100)]
    assert found["throughput/words_per_second"] == [(3000, 100)] and found["throughput/lines_per_second"] == [
        (3000, 10)
    ]


def test_a_per_key_jobs_distinct_keys_are_written(tmp_path):
    writer = Summaries(str(tmp_path), KeySum("words"))
    writer.write(progress(2.0, 2, 70, distinct=9))
    writer.close()
    found = scalars(tmp_path)
    assert found["totals/words"] == [(2000, 70)] and found["totals/distinct_keys"] == [(2000, 9)]
