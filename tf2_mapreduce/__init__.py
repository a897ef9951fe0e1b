"""tf2_mapreduce: exact MapReduce jobs on TensorFlow 2's parameter-server runtime.

Entry points are `python -m tf2_mapreduce.coordinator` and `python -m tf2_mapreduce.server`.
Importing the package does not import TensorFlow (the coordinator relies on that to
start its local servers first); import the modules you need.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
