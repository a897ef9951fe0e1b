"""The Python API's own objects, without a cluster: the public names, narrow and loaded
on first use; unknown options and settings refused as TypeErrors; per-file values made
as they are read; what `JobHandle.wait` promises of itself: its time-out, and signal
handlers run while it waits."""

import linecache
import signal
import subprocess
import sys
import threading
import time
import types

import numpy as np
import pytest
from helpers.processes import task_env

import tf2_mapreduce as mr
from tf2_mapreduce.run.options import Options


def test_the_public_api_is_narrow_and_loaded_on_first_use():
    assert set(mr.__all__) == {
        "__version__", "Cluster", "JobHandle", "Result", "FileValue", "Progress", "Job", "per_text",
        "WordCount", "WordFreq", "LineCount", "Wc", "LongestLine", "Grep", "RecordCount", "Vocab", "Stats", "Reshard", "Transform",
        "Reducer", "Fold", "Sum", "VectorSum", "Min", "Max", "KeySum", "Distinct", "Vocabularies", "Statistics", "Records",
        "DatasetStats", "FeatureStats", "NumericStats", "StringStats", "unescape",
        "Error", "UsageError", "InputError", "OutputError", "ClusterError", "JobFailed", "MapOutputError",
        "Interrupted", "Cancelled",
    }  # fmt: skip
    for name in mr.__all__:
        assert getattr(mr, name) is not None
    probe = "import sys, tf2_mapreduce, tf2_mapreduce.coordinator; print('tensorflow' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", probe], env=task_env(), capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "False", run.stderr


TF_CONFIG = '{"cluster": {"chief": ["a:1"], "ps": ["b:1"], "worker": ["c:1"]}, "task": {"type": "chief", "index": 0}}'


def test_unknown_options_and_settings_are_type_errors():
    with pytest.raises(TypeError, match=r"unknown option\(s\) chekpoint_dir, retries; the options are split_size,"):
        Options.of(chekpoint_dir="x", retries=3, read_size=10)
    assert Options.of(read_size=10) == Options(read_size=10)
    with pytest.raises(TypeError, match="keep_servng"):
        mr.Cluster.from_tf_config(TF_CONFIG, keep_servng=True)


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
