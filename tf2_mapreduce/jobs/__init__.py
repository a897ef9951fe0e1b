"""Jobs by name (`--job`): the built-in ones, or a user's as "module:ATTRIBUTE"."""

import importlib

from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.jobs import lines, records, wordcount, wordfreq
from tf2_mapreduce.jobs.base import Job, KeySum, Max, Min, Reducer, Sum, VectorSum, per_text
from tf2_mapreduce.jobs.features import vocab

__all__ = [
    "Job",
    "Reducer",
    "Sum",
    "VectorSum",
    "Min",
    "Max",
    "KeySum",
    "per_text",
    "vocab",
    "BUILT_IN",
    "resolve",
]

BUILT_IN = {
    job.name: job
    for job in (wordcount.JOB, wordfreq.JOB, lines.LINECOUNT, lines.WC, lines.LONGEST_LINE, records.RECORDCOUNT)
}
BUILT_IN_NAMES = sorted(list(BUILT_IN) + ["grep", "vocab"])


def resolve(name, pattern=None):
    """The job `name` names: a built-in job, or "package.module:ATTRIBUTE" holding a `Job`.

    Only the coordinator imports a user's module: map steps are traced into graphs
    that the workers run, so workers need no user code. Raises `UsageError`.
    """
    if name == "vocab":
        raise UsageError("{setting:job}=vocab needs {setting:features}: from Python, jobs.vocab(features)")
    if name == "grep":
        if pattern is None:
            raise UsageError(
                "{setting:job}=grep needs {setting:pattern} (an RE2 regular expression matched against whole lines)"
            )
        return lines.grep(pattern)
    if pattern is not None:
        raise UsageError("{setting:pattern} is only for {setting:job}=grep")
    if name in BUILT_IN:
        return BUILT_IN[name]
    module_name, sep, attribute = name.partition(":")
    if not sep:
        raise UsageError(
            "{setting:job}=%s: unknown job (built in: %s; or module:ATTRIBUTE for your own)"
            % (name, ", ".join(BUILT_IN_NAMES))
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise UsageError("{setting:job}=%s: cannot import %s: %s" % (name, module_name, e)) from None
    job = getattr(module, attribute, None)
    if not isinstance(job, Job):
        raise UsageError("{setting:job}=%s: %s.%s is not a tf2_mapreduce Job" % (name, module_name, attribute))
    return job
