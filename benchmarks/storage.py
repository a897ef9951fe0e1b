"""The "storage" part: the default command on 40 of the small files as objects of a Cloud Storage
server on loopback (the tests' emulator behind a TLS proxy), as it answers and with 5% of reads 503."""

import atexit
import functools
import itertools
import logging
import os
import sys
import tempfile
from collections.abc import Callable

from benchmarks import REPO
from benchmarks.names import STORAGE_503, STORAGE_GCS, STORAGE_LOCAL
from benchmarks.timing import Contender, Run
from benchmarks.wordcount import run_ours

__all__ = ["Bucket", "contenders"]

FILES = 40  # of the "small" part: the shape of the storage issue's measurements (40 objects)
SHARE = 0.05  # of the reads answered 503


def _helpers():
    """tests/helpers' server and faults, imported when this part runs: the emulator is one of
    the tests' dependencies, which a run of the other parts does without."""
    tests = os.path.join(REPO, "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from helpers import gcs_server, storage_faults

    return gcs_server, storage_faults


class Bucket:
    """The first `FILES` of `paths` as objects of a bucket, under `directory` (a gs://
    path); `env` is the environment that reaches them, with TensorFlow's own retry
    settings as a user has them (the tests shorten them)."""

    def __init__(self, paths: list[str], directory: str):
        gcs_server, self._faults = _helpers()
        logging.getLogger().setLevel(logging.WARNING)  # the emulator logs every request at INFO
        self.server = gcs_server.GcsServer(directory)
        self.server.create_bucket("bench")
        self.directory = "gs://bench/small"
        for path in paths[:FILES]:
            with open(path, "rb") as f:
                self.server.put("bench", "small/" + os.path.basename(path), f.read())
        self.env = self.server.env(dict(os.environ))
        for name in ("GCS_RETRY_CONFIG_INIT_DELAY_TIME_US", "GCS_RETRY_CONFIG_MAX_RETRIES"):
            self.env.pop(name, None)
        self._seeds = itertools.count()

    def failing(self, run: Callable[[], Run]) -> Run:
        """`run()` while `SHARE` of the reads are answered 503 (seeded, a new seed a run)."""
        fault = self._faults.Fault(
            self._faults.STATUS, kinds=("read",), status=503, share=SHARE, seed=next(self._seeds)
        )
        self.server.faults.add(fault)
        try:
            return run()
        finally:
            self.server.faults.clear()

    def stop(self) -> None:
        self.server.stop()


def contenders(paths: list[str]) -> list[Contender]:
    """The same files on local disk, on the server, and on the server with faults; the
    server lives as long as this process."""
    bucket = Bucket(paths, tempfile.mkdtemp(prefix="tf2_mapreduce-bench-gcs-"))
    atexit.register(bucket.stop)
    remote = functools.partial(run_ours, bucket.directory, "wordcount", 1, 2, "inprocess", bucket.env)
    return [
        (STORAGE_LOCAL, functools.partial(run_ours, paths, "wordcount", 1, 2, "inprocess")),
        (STORAGE_GCS, remote),
        (STORAGE_503, lambda: bucket.failing(remote)),
    ]
