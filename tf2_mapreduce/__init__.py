"""tf2_mapreduce: exact MapReduce jobs on TensorFlow 2's parameter-server runtime.

From Python: `with tf2_mapreduce.Cluster.local() as cluster: cluster.run(tf2_mapreduce.WordCount(), inputs)`.
From a shell: `python -m tf2_mapreduce.coordinator` and `python -m tf2_mapreduce.server`.
`__all__` is the public API. Importing the package does not import TensorFlow (the CLI
relies on that to start its local servers first): the names are loaded on first use.
Imported before TensorFlow, it keeps TensorFlow's C++ log lines and start-up lines off
stderr (`quiet`); set TF_CPP_MIN_LOG_LEVEL to see them.
"""

import importlib
import importlib.util

from tf2_mapreduce import quiet

# Each public name, by the module it lives in; the built-in jobs are those `jobs` finds,
# the reducers those of `reducers.__all__`: adding one touches only its own module.
_EXPORTS = {
    "client": ("Cluster", "JobHandle"),
    "outputs.result": ("Result",),
    "reducers.base": ("FileValue",),
    "outputs.sinks.records": ("Records",),
    "outputs.files": ("unescape",),
    "run.loop": ("Progress",),
    "jobs.base": ("Job", "per_text"),
    "reducers.statistics.model": ("DatasetStats", "FeatureStats", "NumericStats", "StringStats"),
    "errors": (
        "Error",
        "UsageError",
        "InputError",
        "OutputError",
        "ClusterError",
        "JobFailed",
        "MapOutputError",
        "Interrupted",
        "Cancelled",
    ),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}

__version__ = "0.1.0"

quiet.before_tensorflow()


def _jobs():
    return {cls.__name__: cls for cls in importlib.import_module("tf2_mapreduce.jobs").built_in().values()}


def _reducers():
    return importlib.import_module("tf2_mapreduce.reducers")


def __getattr__(name):
    if name in _HOME:
        return getattr(importlib.import_module("tf2_mapreduce." + _HOME[name]), name)
    if name == "__all__":
        return ["__version__", *_HOME, *_jobs(), *_reducers().__all__]
    # A submodule's name is left to the import system (`from tf2_mapreduce import native`
    # asks here first, maybe while the jobs are being imported).
    if name.startswith("_") or importlib.util.find_spec("tf2_mapreduce." + name) is not None:
        raise AttributeError("module 'tf2_mapreduce' has no attribute %r" % name)
    jobs = _jobs()
    if name in jobs:
        return jobs[name]
    if name in _reducers().__all__:
        return getattr(_reducers(), name)
    raise AttributeError("module 'tf2_mapreduce' has no attribute %r" % name)
