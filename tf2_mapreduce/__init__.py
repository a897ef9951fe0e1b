"""tf2_mapreduce: exact MapReduce jobs on TensorFlow 2's parameter-server runtime.

From Python: `with tf2_mapreduce.Cluster.local() as cluster: cluster.run(job, inputs)`
(see `client`). From a shell: `python -m tf2_mapreduce.coordinator` and
`python -m tf2_mapreduce.server`. Importing the package does not import TensorFlow
(the CLI relies on that to start its local servers first): the names below are
loaded on first use.
"""

import importlib

# Each public name, by the module it lives in.
_EXPORTS = {
    "client": ("Cluster", "JobHandle", "Result", "FileValue", "PerFile"),
    "jobs.base": ("Job", "per_text"),
    "reducers": ("Reducer", "Sum", "VectorSum", "Min", "Max", "KeySum"),
    "errors": ("Error", "UsageError", "InputError", "ClusterError", "JobFailed", "Interrupted", "Cancelled"),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = ["__version__", *_HOME, "jobs"]

__version__ = "0.1.0"


def __getattr__(name):
    if name == "jobs":
        return importlib.import_module("tf2_mapreduce.jobs")
    if name in _HOME:
        return getattr(importlib.import_module("tf2_mapreduce." + _HOME[name]), name)
    raise AttributeError("module 'tf2_mapreduce' has no attribute %r" % name)
