"""bench.py's "storage" part: the default command on the objects of a Cloud Storage server
on loopback (the tests' emulator behind a TLS proxy, tests/helpers/gcs_server.py), as it
answers, and with a share of its reads answered 503."""

import itertools
import logging
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from helpers.gcs_server import GcsServer  # noqa: E402 - after the path it is found on
from helpers.storage_faults import STATUS, Fault  # noqa: E402

__all__ = ["Bucket", "FILES", "SHARE"]

FILES = 40  # of the "small" part: the shape of the storage issue's measurements (40 objects)
SHARE = 0.05  # of the reads answered 503


class Bucket:
    """The first `FILES` of `paths` as objects of a bucket, under `directory` (a gs://
    path); `env` is the environment that reaches them, with TensorFlow's own retry
    settings as a user has them (the tests shorten them)."""

    def __init__(self, paths, directory):
        logging.getLogger().setLevel(logging.WARNING)  # the emulator logs every request at INFO
        self.server = GcsServer(directory)
        self.server.create_bucket("bench")
        self.directory = "gs://bench/small"
        for path in paths[:FILES]:
            with open(path, "rb") as f:
                self.server.put("bench", "small/" + os.path.basename(path), f.read())
        self.env = self.server.env(dict(os.environ))
        for name in ("GCS_RETRY_CONFIG_INIT_DELAY_TIME_US", "GCS_RETRY_CONFIG_MAX_RETRIES"):
            self.env.pop(name, None)
        self._seeds = itertools.count()

    def failing(self, run):
        """`run()` while `SHARE` of the reads are answered 503 (seeded, a new seed a run)."""
        self.server.faults.add(Fault(STATUS, kinds=("read",), status=503, share=SHARE, seed=next(self._seeds)))
        try:
            return run()
        finally:
            self.server.faults.clear()

    def stop(self):
        self.server.stop()
