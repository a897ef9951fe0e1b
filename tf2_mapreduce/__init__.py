"""tf2_mapreduce: exact MapReduce jobs on TensorFlow 2's parameter-server runtime.

From Python: `with tf2_mapreduce.Cluster.local() as cluster: cluster.run(tf2_mapreduce.WordCount(), inputs)`.
From a shell: `python -m tf2_mapreduce.coordinator` and `python -m tf2_mapreduce.server`.
`__all__` is the public API. Importing the package does not import TensorFlow (the CLI
relies on that to start its local servers first): the names are loaded on first use.
"""

import importlib
import importlib.util

# Each public name, by the module it lives in; the reducers are those of `reducers.__all__`.
_EXPORTS = {
    "client": ("Cluster", "JobHandle"),
    "outputs.result": ("Result", "FileValue"),
    "run.loop": ("Progress",),
    "jobs.base": ("Job", "per_text"),
    "jobs.wordcount": ("WordCount",),
    "jobs.wordfreq": ("WordFreq",),
    "jobs.lines": ("LineCount", "Wc", "LongestLine", "Grep"),
    "jobs.records": ("RecordCount",),
    "jobs.features": ("Vocab", "Stats"),
    "errors": (
        "Error",
        "UsageError",
        "InputError",
        "OutputError",
        "ClusterError",
        "JobFailed",
        "Interrupted",
        "Cancelled",
    ),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}

__version__ = "0.1.0"


def _reducers():
    return importlib.import_module("tf2_mapreduce.reducers")


def __getattr__(name):
    if name in _HOME:
        return getattr(importlib.import_module("tf2_mapreduce." + _HOME[name]), name)
    if name == "__all__":  # the reducers' names are theirs to list: adding one touches only its module
        return ["__version__", *_HOME, *_reducers().__all__]
    # A submodule's name is left to the import system (`from tf2_mapreduce import cli` asks
    # for it here first): looking it up among the reducers would import TensorFlow.
    if not name.startswith("_") and importlib.util.find_spec("tf2_mapreduce." + name) is None:
        if name in _reducers().__all__:
            return getattr(_reducers(), name)
    raise AttributeError("module 'tf2_mapreduce' has no attribute %r" % name)
