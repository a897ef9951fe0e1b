"""Captures what TensorFlow says when a task lacks an op that the coordinator has: a worker
started without tf2_mapreduce's native ops (TF2_MAPREDUCE_NATIVE=off) asked to run one
eagerly (`native.missing_on`) and inside a scheduled function (a map step). Writes each
message to tests/fixtures/, where tests/unit/test_failure_text.py reads them.

    python scripts/capture_missing_op.py
"""

import os
import sys

from tf2_mapreduce.cluster import local as local_cluster
from tf2_mapreduce.cluster import spec as cluster_spec

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "fixtures")


def main():
    spec = local_cluster.local_spec(1, 1)
    os.environ["TF2_MAPREDUCE_NATIVE"] = "off"  # for the servers only
    servers = local_cluster.ChildServers(spec)
    servers.start()
    del os.environ["TF2_MAPREDUCE_NATIVE"]
    try:
        import tensorflow as tf

        from tf2_mapreduce import native
        from tf2_mapreduce.cluster import chief

        library = native.load()
        assert library is not None, native.unavailable()
        coordinator = chief.connect(spec, servers, 120, verbose=False)
        worker = cluster_spec.device("worker", 0)
        messages = {}
        try:
            with tf.device(worker):
                library.tf2_mapreduce_file_sizes(tf.constant([], tf.string)).numpy()
        except tf.errors.NotFoundError as e:
            messages["missing_op_eager.txt"] = e.message

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def step(paths):
            return library.tf2_mapreduce_file_sizes(paths)

        try:
            coordinator.schedule(step, args=(tf.constant([], tf.string),)).fetch()
        except tf.errors.NotFoundError as e:
            messages["missing_op_scheduled.txt"] = e.message
        assert len(messages) == 2, "a task without the ops ran them: %s" % sorted(messages)
        for name, text in messages.items():
            with open(os.path.join(FIXTURES, name), "w", encoding="utf-8") as f:
                f.write(text)
            print("%s: %s" % (name, text.splitlines()[0][:160]))
    finally:
        servers.close()
    sys.stdout.flush()
    os._exit(0)  # TF would try to release its remote state on servers that are gone


if __name__ == "__main__":
    main()
