"""Lookup tables filled from a file where the map steps run: on a cluster, one per worker,
filled there once by TensorFlow's own kernel, so that no vocabulary term is in any graph.

A step captures its worker's table when it is called (ClusterCoordinator's per-worker
resources, which it makes again on a worker that comes back); outside a cluster
coordinator, one table is made here. Either way a table lives as long as its `FileTable`.
"""

from tf2_mapreduce.lazy_tf import tf

__all__ = ["FileTable"]


class FileTable:
    """The lookup table of `dtypes` (key, value) that TensorFlow's InitializeTableFromTextFileV2
    fills from the file at `path`, as `attr` (that op's attributes) says: the table a saved
    transform_fn makes of a vocabulary, made where each step runs. `path` must be readable
    there (a worker reads it: the output directory, which every worker reaches)."""

    def __init__(self, path: str, dtypes, attr):
        self.path, self.dtypes = path, tuple(dtypes)
        self._attr = {
            "key_index": attr["key_index"].i,
            "value_index": attr["value_index"].i,
            "vocab_size": attr["vocab_size"].i,
            "delimiter": attr["delimiter"].s.decode(),
            "offset": attr["offset"].i,
        }
        self._made = {}  # id of the coordinator (None: here) -> (its coordinator, what it made)

    def _fill(self):
        handle = tf.raw_ops.AnonymousHashTable(key_dtype=self.dtypes[0], value_dtype=self.dtypes[1])
        filled = tf.raw_ops.InitializeTableFromTextFileV2(
            table_handle=handle, filename=tf.constant(self.path), **self._attr
        )
        with tf.control_dependencies([filled]):
            return tf.identity(handle)

    def handle(self):
        """The table's handle in the graph being traced: the table of the worker the step
        runs on where it is scheduled by a cluster coordinator, else one made here. Made
        on first use (a worker's when its first step is scheduled, then kept)."""
        graph = tf.compat.v1.get_default_graph()
        coordinator = getattr(tf.distribute.get_strategy(), "_cluster_coordinator", None)
        key = id(coordinator) if coordinator is not None else None
        if key not in self._made:
            with tf.init_scope():
                if coordinator is None:
                    made = self._fill()
                else:
                    made = coordinator._create_per_worker_resources(tf.function(self._fill))
            self._made[key] = (coordinator, made)
        made = self._made[key][1]
        if coordinator is None:
            return graph.capture(made) if hasattr(graph, "capture") else made
        # Bound where the step function is called, which is its outermost graph (a step
        # maps in nested functions: tf.map_fn's loop, tf.data's reduce); those capture it.
        from tensorflow.python.framework.func_graph import FuncGraph

        outermost = graph
        while isinstance(getattr(outermost, "outer_graph", None), FuncGraph):
            outermost = outermost.outer_graph
        with outermost.as_default():
            bound = outermost.capture_call_time_value(
                lambda: _on_worker(made), tf.TensorSpec([], tf.resource), key=(id(self), "file table")
            )
        return bound if graph is outermost else graph.capture(bound)


def _on_worker(per_worker):
    """The handle of `per_worker` (PerWorkerValues) of the worker a step is dispatched to."""
    from tensorflow.python.distribute.coordinator import coordinator_context

    dispatched = coordinator_context.get_current_dispatch_context()
    if dispatched is None:
        raise RuntimeError("a step using a worker's file table ran outside a cluster coordinator's dispatch")
    return dispatched.maybe_get_remote_value(per_worker._values[dispatched.worker_index])
