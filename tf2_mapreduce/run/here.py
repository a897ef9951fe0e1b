"""A statistics job over inputs small enough to read here, run in this process: its own map
function over every record at once and its own `collect`, where starting a pass costs more."""

from tf2_mapreduce import native
from tf2_mapreduce.inputs import formats
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.paths import needs_network
from tf2_mapreduce.reducers import Statistics
from tf2_mapreduce.run.options import Options

__all__ = ["HERE_BYTES", "run_here"]

# Inputs of at most this many bytes on disk (a compressed file as stored): a pass over them
# on the cluster costs more to start (tracing, instantiating and scheduling its steps:
# about 0.7 s) than reading them here.
HERE_BYTES = 4 << 20


class _Counted:
    """The state `collect` reads: every (key, count) of one map over all the records, as
    the ps tasks' tables give them, streamed from the two arrays."""

    def __init__(self, keys, counts):
        self._keys, self._counts = keys.numpy(), counts.numpy()

    def entries(self, min_count=1):
        for key, count in zip(self._keys, self._counts):
            if count >= min_count:
                yield key, int(count)


def run_here(job, files, compression="auto", read_size=Options.read_size):
    """`job` (a statistics job: `map_input="dataset"`, a `Statistics` reducer, whose collect
    reads the table's entries alone) over `files` (`inputs.files.Files`), run here: its
    `map_fn` over one dataset of every file's batches, as a map step streams a piece, and
    its reducer's `collect` of those counts, as the cluster's run reads its tables. Returns
    the `Collected`, or None where it cannot run here (more than `HERE_BYTES`, files on a
    file system reached through the network, no native ops, another kind of job); raises
    what reading the files raises (a pass then says which file and why). Blocking."""
    if job.map_input != "dataset" or not isinstance(job.reducer, Statistics) or native.unavailable():
        return None
    # Storage reached through the network is the workers' to read: its outages and stalls
    # are waited out by a pass, which also spreads the latency of each file over them.
    if int(files.sizes.sum()) > HERE_BYTES or any(needs_network(path) for path in files.paths):
        return None
    paths = tf.constant(list(files.paths), tf.string)
    compressions = tf.constant(formats.compressions_of(files, compression), tf.string)

    @tf.function(autograph=False)
    def counted():
        pieces = tf.data.Dataset.from_tensor_slices((paths, compressions))
        batches = pieces.flat_map(lambda path, kind: job.format.stream(path, kind, read_size))
        return job.reducer.check(job.map_fn(batches), None, job.name, job.format.item)

    keys, counts = counted()
    return job.reducer.collect(_Counted(keys, counts), None, None)
