"""`python -m benchmarks.wide_examples --output_dir D --examples N`: the "transform_wide"
part's examples, in 4 GZIP'd shards: two string features, "wide" of N distinct values
(example i's is "w<i>") and "narrow" of 1,000 ("n<i mod 1000>"), the same bytes every time."""

import os

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "Directory to write the shards in.", required=True)
flags.DEFINE_integer("examples", 1_000_000, "Examples in all.", lower_bound=1)

SHARDS = 4
NARROW = 1000  # the narrow feature's distinct values


def main(argv):
    del argv
    import tensorflow as tf

    os.makedirs(FLAGS.output_dir, exist_ok=True)
    for shard in range(SHARDS):
        path = os.path.join(FLAGS.output_dir, "part-%d-of-%d.tfrecord.gz" % (shard, SHARDS))
        with tf.io.TFRecordWriter(path, "GZIP") as writer:
            for i in range(shard, FLAGS.examples, SHARDS):
                feature = {
                    "wide": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"w%d" % i])),
                    "narrow": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"n%d" % (i % NARROW)])),
                }
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


if __name__ == "__main__":
    app.run(main)
