"""Jobs by the names the CLI gives them (`--job`): the built-in ones, each a `Job` class of
its module here, or a user's as "module:ATTRIBUTE". Free of TensorFlow: a job's name and
parameters are checked (`check`) before anything starts; `resolve` imports the job."""

import importlib

from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.jobs.feature_spec import parse_features, parse_names

__all__ = ["BUILT_IN", "check", "resolve"]

# name -> (module, class); the public names (tf2_mapreduce.WordCount...) are these classes.
BUILT_IN = {
    "wordcount": ("tf2_mapreduce.jobs.wordcount", "WordCount"),
    "wordfreq": ("tf2_mapreduce.jobs.wordfreq", "WordFreq"),
    "linecount": ("tf2_mapreduce.jobs.lines", "LineCount"),
    "wc": ("tf2_mapreduce.jobs.lines", "Wc"),
    "longestline": ("tf2_mapreduce.jobs.lines", "LongestLine"),
    "grep": ("tf2_mapreduce.jobs.lines", "Grep"),
    "recordcount": ("tf2_mapreduce.jobs.records", "RecordCount"),
    "vocab": ("tf2_mapreduce.jobs.features", "Vocab"),
    "stats": ("tf2_mapreduce.jobs.features", "Stats"),
}
# The built-in jobs that take a parameter, the setting that gives it, and how it is checked.
PARAMETER = {"grep": "pattern", "vocab": "features", "stats": "features"}
_CHECK = {"vocab": parse_features, "stats": parse_names}
_OPTIONAL = {"stats"}  # all features when none is named
_NEEDS = {
    "pattern": "an RE2 regular expression matched against whole lines",
    "features": "feature names, comma-separated",
}


def check(name: str, pattern: str | None = None, features: str | None = None) -> None:
    """Checks, without importing any job, that `name` is a built-in job or names a
    user's ("module:ATTRIBUTE"), and that it is given the parameters it takes and no
    other (`features` parsed as the job reads it: `feature_spec`). Raises `UsageError`."""
    given = {"pattern": pattern, "features": features}
    if name not in BUILT_IN and ":" not in name:
        raise UsageError(
            "{setting:job}=%s: unknown job (built in: %s; or module:ATTRIBUTE for your own)"
            % (name, ", ".join(sorted(BUILT_IN)))
        )
    takes = PARAMETER.get(name)
    for setting, value in given.items():
        if value is not None and setting != takes:
            jobs = [job for job, parameter in PARAMETER.items() if parameter == setting]
            raise UsageError("{setting:%s} is only for {setting:job}=%s" % (setting, " or ".join(jobs)))
    if takes and given[takes] is None and name not in _OPTIONAL:
        raise UsageError("{setting:job}=%s needs {setting:%s} (%s)" % (name, takes, _NEEDS[takes]))
    if given.get(takes) is not None and name in _CHECK:
        _CHECK[name](given[takes])


def resolve(name: str, pattern: str | None = None, features: str | None = None):
    """The `Job` that `name` and its parameters give (see `check`): a built-in job, or the
    `Job` held by "package.module:ATTRIBUTE". Raises `UsageError`.

    Only the coordinator imports a user's module: map steps are traced into graphs
    that the workers run, so workers need no user code.
    """
    check(name, pattern, features)
    if name in BUILT_IN:
        module, attribute = BUILT_IN[name]
        job_class = getattr(importlib.import_module(module), attribute)
        takes = PARAMETER.get(name)
        return job_class({"pattern": pattern, "features": features}[takes]) if takes else job_class()
    from tf2_mapreduce.jobs.base import Job

    module_name, _, attribute = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise UsageError("{setting:job}=%s: cannot import %s: %s" % (name, module_name, e)) from None
    job = getattr(module, attribute, None)
    if not isinstance(job, Job):
        raise UsageError("{setting:job}=%s: %s.%s is not a tf2_mapreduce Job" % (name, module_name, attribute))
    return job
