"""The contenders' names, as the tables print them: the parts that run a contender and the
report and targets that look it up by name share them, and the features the tf.Example parts read."""

__all__ = [
    "DEFAULT",
    "DEFAULT_FREQ",
    "FEATURES",
    "FIND_CAT",
    "POOL",
    "POOL_EXAMPLES",
    "POOL_FREQ",
    "STATS",
    "STATS_ALL",
    "STATS_ALL_TASKS",
    "STORAGE_503",
    "STORAGE_GCS",
    "STORAGE_LOCAL",
    "TFDATA",
    "TFDATA_ONE",
    "TF_IMPORT",
    "TRANSFORM_OURS",
    "TRANSFORM_SMALL",
    "TRANSFORM_WIDE",
    "TRANSFORM_NARROW",
    "SCALE_ONCE",
    "SCALE_TWICE",
    "SCALE_TFT",
    "SCALE_WIDE_TERMS",
    "TRANSFORM_TFT",
    "KERAS_FEW",
    "KERAS_FEW_OURS",
    "KERAS_FEW_DEFAULT",
    "KERAS_ALL_DEFAULT",
    "KERAS_ALL",
    "KERAS_ALL_OURS",
    "VOCAB",
    "VOCAB_ONE_WORKER",
    "VOCAB_TASKS",
    "VOCAB_TWO_WORKERS",
]

POOL = "python Pool(2), 32 MiB tasks"  # the strongest plain peer
POOL_FREQ = "freq: python Pool(2) Counter"
FIND_CAT = "find | xargs cat | wc -w"
DEFAULT = "tf2_mapreduce 1ps+2w in-process"  # what the default command runs
DEFAULT_FREQ = "freq: " + DEFAULT
TFDATA = "tf.data + parse_example, 2 processes"  # one plain pass per core: the vocab target's yardstick
POOL_EXAMPLES = "python Pool(2) protobuf + Counter"
VOCAB = "tf2_mapreduce vocab 1ps+2w in-process"
STATS = "tf2_mapreduce stats 1ps+2w in-process"
STATS_ALL = "tf2_mapreduce stats, every feature"
# The same two jobs with a process per task: what each task (ps, worker, coordinator) holds.
VOCAB_TASKS = "tf2_mapreduce vocab 1ps+2w processes"
STATS_ALL_TASKS = "tf2_mapreduce stats, every feature, 1ps+2w processes"
# One large TFRecord file, cut into byte ranges: one worker, two, and one tf.data pass
# (a TFRecord file cannot be split by the plain peers, nor by Beam's source).
TFDATA_ONE = "tf.data + parse_example, 1 process"
TF_IMPORT = "python -c 'import tensorflow'"
VOCAB_ONE_WORKER = "tf2_mapreduce vocab 1ps+1w processes"
VOCAB_TWO_WORKERS = "tf2_mapreduce vocab 1ps+2w processes"
STORAGE_LOCAL = "default command, local disk"
STORAGE_GCS = "default command, gs:// (loopback server)"
STORAGE_503 = "default command, gs://, 5% of reads 503"
TRANSFORM_OURS = "transform: a process per task"
TRANSFORM_TFT = "transform: tf.Transform 1.21, DirectRunner"
# 20,000 examples as a new user first runs them: the default command, no --schema.
TRANSFORM_SMALL = "transform: the default command, no schema"
# 1,000,000 examples, a vocabulary of each (a process per task): the transform pass's time.
TRANSFORM_WIDE = "transform: a vocabulary of 1,000,000 terms"
TRANSFORM_NARROW = "transform: a vocabulary of 1,000 terms"
# The scale part: ours at --scale_examples and at twice as many; tf.Transform at --scale_tft_examples.
SCALE_ONCE = "transform at scale: a process per task, N examples"
SCALE_TWICE = "transform at scale: a process per task, 2N examples"
SCALE_TFT = "transform at scale: tf.Transform 1.21, DirectRunner"
# A whole vocabulary over 2 GiB, more than a GraphDef holds: terms of 1,000 bytes.
SCALE_WIDE_TERMS = "transform at scale: a process per task, a vocabulary over 2 GiB"
# The transform_keras part: the transform part's function, ours whole against Keras's
# preprocessing layers' adapt of the same analyzers alone, over 3 shards and over all of them.
KERAS_FEW_OURS = "transform, 3 shards: a process per task"
KERAS_FEW_DEFAULT = "transform, 3 shards: the default command"
KERAS_FEW = "transform, 3 shards: Keras adapt alone"
KERAS_ALL_OURS = "transform, every shard: a process per task"
KERAS_ALL_DEFAULT = "transform, every shard: the default command"
KERAS_ALL = "transform, every shard: Keras adapt alone"
FEATURES = ("query", "tags", "user_id")
