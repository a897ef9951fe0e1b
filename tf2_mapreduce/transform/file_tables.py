"""Lookup tables filled from a file where the map steps run: on a cluster, one per worker,
filled there once by TensorFlow's own kernel, so that no vocabulary term is in any graph.

A step captures its worker's table when it is called (ClusterCoordinator's per-worker
resources, which it makes again on a worker that comes back); outside a cluster
coordinator, one table is made here. The tables live until `release`.
"""

import weakref

from tf2_mapreduce import storage
from tf2_mapreduce.lazy_tf import tf

__all__ = ["FileTable"]


class FileTable:
    """The lookup table of `dtypes` (key, value) that TensorFlow's InitializeTableFromTextFileV2
    fills from the file at `path`, as `attr` (that op's attributes) says: the table a saved
    transform_fn makes of a vocabulary, made where each step runs. `path` must be readable
    there (a worker reads it: the output directory, which every worker reaches)."""

    def __init__(self, path: str, dtypes, attr):
        self.path, self.dtypes = path, tuple(dtypes)
        self.attr = {
            "key_index": attr["key_index"].i,
            "value_index": attr["value_index"].i,
            "vocab_size": attr["vocab_size"].i,
            "delimiter": attr["delimiter"].s.decode(),
            "offset": attr["offset"].i,
        }
        # What was made, by the coordinator it was made for (None: here). Keyed weakly: a
        # coordinator's tables are its own, and an id could be another's once it is gone.
        self._made = weakref.WeakKeyDictionary()
        self._here = None

    def _fill(self):
        handle = tf.raw_ops.AnonymousHashTable(key_dtype=self.dtypes[0], value_dtype=self.dtypes[1])
        filled = tf.raw_ops.InitializeTableFromTextFileV2(
            table_handle=handle, filename=tf.constant(self.path), **self.attr
        )
        with tf.control_dependencies([filled]):
            return tf.identity(handle)

    def _fill_on_worker(self):
        # Run by the coordinator for each worker (and again for one that comes back), its
        # ops there: an outage of the file's storage is waited out, as every read is.
        return storage.retrying(self._fill, self.path)

    def handle(self):
        """The table's handle in the graph being traced: the table of the worker the step
        runs on where it is scheduled by a cluster coordinator (every worker's made when
        the first step is traced), else one made here."""
        graph = tf.compat.v1.get_default_graph()
        coordinator = getattr(tf.distribute.get_strategy(), "_cluster_coordinator", None)
        if coordinator is None:
            if self._here is None:
                with tf.init_scope():
                    self._here = self._fill()
            return graph.capture(self._here) if hasattr(graph, "capture") else self._here
        if coordinator not in self._made:
            with tf.init_scope():
                self._made[coordinator] = coordinator._create_per_worker_resources(self._fill_on_worker)
        # Bound once, in the step function's outermost graph, which the coordinator calls; the
        # functions nested in it (tf.map_fn's loop, tf.data's reduce) capture that one value.
        from tensorflow.python.framework.func_graph import FuncGraph

        outermost = graph
        while isinstance(getattr(outermost, "outer_graph", None), FuncGraph):
            outermost = outermost.outer_graph
        owner = weakref.ref(coordinator)
        with outermost.as_default():
            bound = outermost.capture_call_time_value(
                lambda: self._on_worker(owner()), tf.TensorSpec([], tf.resource), key=(id(self), "file table")
            )
        return bound if graph is outermost else graph.capture(bound)

    def _on_worker(self, coordinator):
        """The handle of the table of the worker a step is dispatched to."""
        from tensorflow.python.distribute.coordinator import coordinator_context

        dispatched = coordinator_context.get_current_dispatch_context()
        made = self._made.get(coordinator) if coordinator is not None else None
        if dispatched is None or made is None:
            raise RuntimeError(
                "the table of %s is used outside a step of its coordinator, or after release" % self.path
            )
        try:
            return dispatched.maybe_get_remote_value(made._values[dispatched.worker_index])
        except AssertionError as e:  # TensorFlow's word for a resource that failed to be made
            raise RuntimeError(
                "worker %d could not fill the table of %s: %s" % (dispatched.worker_index, self.path, e)
            ) from None

    def release(self):
        """Lets the tables go (every worker's, and the one here): they are freed where they
        are once nothing else holds them. The steps that captured them must not run again."""
        self._made.clear()
        self._here = None
