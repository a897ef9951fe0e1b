"""tf2_mapreduce: exact MapReduce jobs on TensorFlow 2's parameter-server runtime.

From Python: `with tf2_mapreduce.Cluster.local() as cluster: cluster.run(job, inputs)`
(see `client`). From a shell: `python -m tf2_mapreduce.coordinator` and
`python -m tf2_mapreduce.server`. Importing the package does not import TensorFlow
(the CLI relies on that to start its local servers first): the names below are
loaded on first use.
"""

import importlib

__all__ = [
    "__version__",
    "Cluster",
    "JobHandle",
    "Result",
    "FileValue",
    "Job",
    "per_text",
    "Reducer",
    "Sum",
    "VectorSum",
    "Min",
    "Max",
    "KeySum",
    "Error",
    "UsageError",
    "InputError",
    "ClusterError",
    "JobFailed",
    "Interrupted",
    "Cancelled",
    "jobs",
]

__version__ = "0.1.0"

_HOME = {
    "Cluster": "client",
    "JobHandle": "client",
    "Result": "client",
    "FileValue": "client",
    "Job": "jobs.base",
    "per_text": "jobs.base",
    "Reducer": "reducers",
    "Sum": "reducers",
    "VectorSum": "reducers",
    "Min": "reducers",
    "Max": "reducers",
    "KeySum": "reducers",
    "Error": "errors",
    "UsageError": "errors",
    "InputError": "errors",
    "ClusterError": "errors",
    "JobFailed": "errors",
    "Interrupted": "errors",
    "Cancelled": "errors",
}


def __getattr__(name):
    if name == "jobs":
        return importlib.import_module("tf2_mapreduce.jobs")
    if name in _HOME:
        return getattr(importlib.import_module("tf2_mapreduce." + _HOME[name]), name)
    raise AttributeError("module 'tf2_mapreduce' has no attribute %r" % name)
