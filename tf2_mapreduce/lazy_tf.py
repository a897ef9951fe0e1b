"""TensorFlow, imported on first use. The modules of jobs and reducers use it: the CLI
reads them (a job's name and parameters) before it imports TensorFlow, which takes
seconds and must wait for the listing's fork and the local servers' start."""

import importlib

__all__ = ["tf"]


class _TensorFlow:
    """`tensorflow`'s attributes, the module imported when one is first asked for."""

    def __getattr__(self, name):
        return getattr(importlib.import_module("tensorflow"), name)


tf = _TensorFlow()
