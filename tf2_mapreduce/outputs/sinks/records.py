"""`Records`: a job's map output written as files, not reduced: every record its map_fn
returns, once, in input order, however often a map step runs."""

from dataclasses import dataclass

import numpy as np

from tf2_mapreduce import log, native
from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.outputs.sinks.base import Sink
from tf2_mapreduce.outputs.sinks.pieces import PIECE_FIELDS, PieceWriter, make_dir, missing, pieces_dir
from tf2_mapreduce.outputs.sinks.shards import write
from tf2_mapreduce.reducers.base import Collected, MapOutputError, PerFile, as_tensor, label

__all__ = ["Records"]


@dataclass(frozen=True)
class Records(Sink):
    """Records written as files: `map_fn(texts)` returns the serialized records (a 1-D
    tf.string of any length: a tf.Example per line, a filter's survivors) of a batch of
    texts or records, and the job's output is every record it returned, in input order
    (files in listing order, each file's records in order), as GZIP'd TFRecord files
    `data/part-NNNNN-of-NNNNN.tfrecord.gz` of the output directory.

    Its write (`Sink`): a map step writes each piece's records to a file named for the
    step's attempt (a random id) under the output directory (`pieces.pieces_dir`), then
    commits the piece's row (`pieces.PIECE_FIELDS`) to its slot (`state.slots`), so a
    step run twice leaves two whole files and one committed. Once every piece is
    committed, `finalize_write` has the workers put the committed files together into
    `num_shards` files (0: one per `shards.SHARD_BYTES` of output, at least one), cut
    between pieces: the bytes written depend on the inputs and `read_size` alone, never on
    the number of tasks, faults or timing.
    """

    num_shards: int = 0
    unit: str = "records"

    def __post_init__(self):
        if not isinstance(self.num_shards, int) or self.num_shards < 0:
            raise ValueError("num_shards must be an int >= 0 (0: by size), not %r" % (self.num_shards,))

    def check(self, output, items, job: str, item: str = "text"):
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

    def check_job(self, job, output_dir: str | None) -> None:
        if not output_dir:
            raise UsageError("job %s writes records: give it an output directory ({setting:output_dir})" % job.name)
        if native.unavailable():
            raise UsageError("job %s writes records, which needs the native ops: %s" % (job.name, native.unavailable()))
        if job.map_input != "batch":
            raise UsageError("job %s writes records: its map_fn maps batches (map_input='batch')" % job.name)

    def initialize_write(self, output_dir: str, state, read) -> None:
        """Makes the pieces' directory of `output_dir`, and empties the slots of `state`
        (`PieceSlots`, read through `read`: `run.ps_health.PsHealth.read`) that a resumed
        checkpoint committed whose files are not there (written for another output
        directory, or removed since): those pieces are mapped again. Blocking."""
        directory = pieces_dir(output_dir)
        make_dir(directory)
        done = read(state.done)
        if not done.any():
            return
        gone = missing(directory, read(state.values), done)
        if len(gone):
            log.warning(
                "%d of the %d pieces the checkpoint holds have no files in %s (written for another output "
                "directory, or removed): mapped again" % (len(gone), int(done.sum()), directory)
            )
            state.forget(gone)

    def open_writer(self, output_dir: str) -> PieceWriter:
        return PieceWriter(pieces_dir(output_dir))

    def finalize_write(self, output_dir: str, state, staging: str, workers) -> dict:
        """Has `workers` (`run.on_workers.OnWorkers`) write the shards of the pieces
        committed in `state` into `staging/data/` (`shards.write`); returns the summary:
        records, shards, bytes."""
        done = state.done()
        rows = state.values()[done]
        return write(pieces_dir(output_dir), np.flatnonzero(done), rows, staging, self.num_shards, workers)
