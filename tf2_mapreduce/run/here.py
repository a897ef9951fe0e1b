"""A per-key job over inputs small enough to read here, run in this process: its own map
function over every record at once and its own `collect`, where starting a pass costs more."""

from tf2_mapreduce import native
from tf2_mapreduce.inputs import formats
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.paths import needs_network
from tf2_mapreduce.reducers.keys import KeyCounts

__all__ = ["HERE_BYTES", "run_here"]

# Inputs of at most this many bytes: a pass over them on the cluster costs more to start
# (tracing, instantiating and scheduling its steps: about 0.7 s) than reading them here.
HERE_BYTES = 4 << 20


class _Counted:
    """The state `collect` reads: every (key, count) of one map over all the records."""

    def __init__(self, keys, counts):
        self._entries = list(zip(keys.numpy().tolist(), counts.numpy().tolist()))

    def entries(self, min_count=1):
        return iter([(key, count) for key, count in self._entries if count >= min_count])


def run_here(job, files, compression="auto", read_size=8 << 20):
    """`job` (a `Job` of `map_input="dataset"` whose reducer counts per key) over `files`
    (`inputs.files.Files`), run here: its `map_fn` over one dataset of every file's
    batches, as a map step streams a piece, and its reducer's `collect` of those counts,
    as the cluster's run reads its tables. Returns the `Collected`, or None where it cannot
    run here (too many bytes, files on a file system reached through the network, no
    native ops, another kind of job); raises what reading the
    files raises (a pass then says which file and why). Blocking."""
    if job.map_input != "dataset" or not isinstance(job.reducer, KeyCounts) or native.unavailable():
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
