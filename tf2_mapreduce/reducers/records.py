"""`Records`: a job's map output written as files, not reduced: every record its map_fn
returns, once, in input order, however often a map step runs."""

from dataclasses import dataclass

import numpy as np

from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.reducers.base import Collected, MapOutputError, PerFile, Reducer, as_tensor, label

__all__ = ["Records", "PIECE_FIELDS"]

# What a piece's slot holds: the records its map steps returned, the bytes of the files
# they were written to, the attempt that wrote them (a random id, in the files' names), how
# many files it wrote (one per batch of a streamed piece), and the CRC-32 and length of
# what they compressed (for the GZIP trailer of its shard: `outputs.shards`).
PIECE_FIELDS = ("records", "bytes", "attempt", "parts", "crc", "length")


@dataclass(frozen=True)
class Records(Reducer):
    """Records written as files: `map_fn(texts)` returns the serialized records (a 1-D
    tf.string of any length: a tf.Example per line, a filter's survivors) of a batch of
    texts or records, and the job's output is every record it returned, in input order
    (files in listing order, each file's records in order), as GZIP'd TFRecord files
    `data/part-NNNNN-of-NNNNN.tfrecord.gz` of the output directory.

    Lifecycle: a map step writes each piece's records to a file named for the step's
    attempt (a random id) under the output directory (`outputs.shards.pieces_dir`), then
    commits the piece's row (`PIECE_FIELDS`) to its slot (`state.slots`), so
    a step run twice leaves two whole files and one committed. Once every piece is
    committed, `outputs.shards` puts the committed files together into `num_shards`
    files (0: one per `outputs.shards.SHARD_BYTES` of output, at least one), cut between
    pieces, and removes every piece file: the bytes written depend on the inputs and
    `read_size` alone, never on the number of tasks, faults or timing.
    """

    num_shards: int = 0
    unit: str = "records"

    def __post_init__(self):
        if not isinstance(self.num_shards, int) or self.num_shards < 0:
            raise ValueError("num_shards must be an int >= 0 (0: by size), not %r" % (self.num_shards,))

    def check(self, output, items, job, item="text"):
        needs = "%s needs the serialized records of a batch, a 1-D tf.string" % label(self)
        output = as_tensor(output, job, needs)
        if output.dtype != tf.string:
            raise MapOutputError("job %s: map_fn returned %s values, but %s" % (job, output.dtype.name, needs))
        if output.shape.rank != 1:
            raise MapOutputError("job %s: map_fn returned values of shape %s, but %s" % (job, output.shape, needs))
        return output

    def spec(self):
        return tf.TensorSpec([len(PIECE_FIELDS)], tf.int64)

    def create_state(self, sizes, ps_devices, run_id):
        from tf2_mapreduce.state.slots import PieceSlots

        # Summed for progress: the records and bytes written so far; the rest mean nothing summed.
        summed = [1, 1] + [0] * (len(PIECE_FIELDS) - 2)

        def fold(values):
            return tf.reduce_sum(values * tf.constant(summed, tf.int64), axis=0)

        return PieceSlots(sizes, ps_devices, len(PIECE_FIELDS), fold, (0,) * len(PIECE_FIELDS))

    def value(self, figures):
        return int(figures.value[0])

    def collect(self, state, plan, piece_done):
        values = state.values()
        files = plan.piece_files()
        done = np.flatnonzero(piece_done)
        per_file = np.zeros(len(plan.files), np.int64)
        np.add.at(per_file, files[done], values[done, 0])
        total = int(values[done, 0].sum())
        return Collected(total, None, PerFile(plan.files, per_file, plan.file_done(piece_done), int))
