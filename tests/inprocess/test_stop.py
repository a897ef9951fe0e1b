"""A stop (Ctrl-C, SIGTERM, `JobHandle.cancel`) ends a run once the map steps already
running end: the steps still queued start nothing of the job's, however many there are,
and nothing is lost (the run after it counts every file)."""

import time

import pytest
import tensorflow as tf

import tf2_mapreduce as mr
from tf2_mapreduce.errors import Cancelled

FILES = 40
STEP = 0.2  # seconds each map step takes: a slow read, so that steps queue up


def test_a_stop_starts_none_of_the_steps_still_queued(inprocess, tmp_path):
    for n in range(FILES):
        (tmp_path / ("f%02d.txt" % n)).write_bytes(b"one two three\n")
    started = []  # a map_fn call per map step (one file each), as it begins
    stopped = []

    def slow(text):
        started.append(time.monotonic())
        time.sleep(STEP)
        return len(text.numpy().split())

    def words(text):
        # tf.py_function runs here: the in-process cluster's workers share this Python.
        return tf.reshape(tf.py_function(slow, [text], tf.int64), [])

    job = mr.Job("slow", mr.per_text(words), mr.Sum("words"))
    handle = inprocess.submit(job, [str(tmp_path)], max_pieces=1)
    deadline = time.monotonic() + 60
    while not started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert started, "no map step started within 60 s"
    stopped.append(time.monotonic())
    handle.cancel()
    with pytest.raises(Cancelled):
        handle.wait(60)
    # Those running or about to run when the stop came end; the queued ones fail at once.
    workers = inprocess.spec.num_workers
    assert len([t for t in started if t > stopped[0] + STEP]) <= workers, (len(started), FILES)
    again = inprocess.run(mr.WordCount(), [str(tmp_path)])
    assert again.total == 3 * FILES and again.files_done == FILES
