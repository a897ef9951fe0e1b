"""Jobs by the names the CLI gives them (`--job`): the built-in ones, each a `Job` class of
a module here that declares its name and parameters (found here, not listed), or a
user's as "module:ATTRIBUTE". Free of TensorFlow: a job's name and parameters are
checked (`check`) before anything starts; `resolve` makes the job."""

import importlib
import pkgutil

from tf2_mapreduce.errors import UsageError, raised_by_user_code
from tf2_mapreduce.jobs.base import Job
from tf2_mapreduce.run.passes import Passes

__all__ = ["built_in", "parameters", "check", "resolve"]

_found = {}


def _is_job(value) -> bool:
    """A `Job` subclass, or a job of several passes (`run.passes.Passes`: `Transform`)."""
    return issubclass(value, (Job, Passes))


def built_in() -> dict:
    """{--job name: class} of the built-in jobs: every `Job` or `Passes` subclass of this
    package's modules that says its `COMMAND`, by module name, then in each module's order."""
    if not _found:
        for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
            loaded = importlib.import_module("%s.%s" % (__name__, module.name))
            for value in vars(loaded).values():
                if isinstance(value, type) and value.__module__ == loaded.__name__ and _is_job(value):
                    if value.COMMAND:
                        _found[value.COMMAND] = value
    return _found


def parameters() -> dict:
    """{parameter name: [(--job name, `Parameter`)]} of the built-in jobs' parameters."""
    found = {}
    for command, job_class in built_in().items():
        for parameter in job_class.PARAMETERS:
            found.setdefault(parameter.name, []).append((command, parameter))
    return found


def check(name: str, values: dict) -> None:
    """Checks, without importing TensorFlow, that `name` is a built-in job or names a
    user's ("module:ATTRIBUTE"), and that `values` ({parameter: value or None}) give it
    the parameters it takes and no other, each as it can take it. Raises `UsageError`."""
    jobs = built_in()
    if name not in jobs and ":" not in name:
        raise UsageError(
            "{setting:job}=%s: unknown job (built in: %s; or module:ATTRIBUTE for your own)"
            % (name, ", ".join(sorted(jobs)))
        )
    takes = {p.name: p for p in jobs[name].PARAMETERS} if name in jobs else {}
    for setting, value in values.items():
        if value is not None and setting not in takes:
            users = [command for command, _ in parameters().get(setting, ())]
            raise UsageError("{setting:%s} is only for {setting:job}=%s" % (setting, " or ".join(users)))
    for parameter in takes.values():
        value = values.get(parameter.name)
        if value is None and parameter.required:
            raise UsageError("{setting:job}=%s needs {setting:%s} (%s)" % (name, parameter.name, parameter.help))
        if value is not None and parameter.check:
            parameter.check(value)


def resolve(name: str, values: dict) -> Job:
    """The `Job` (or `Passes`: a `Transform`) that `name` and its parameters' `values` give (see
    `check`): a built-in job, or the `Job` held by "package.module:ATTRIBUTE". Raises `UsageError`.

    Only the coordinator imports a user's module: map steps are traced into graphs
    that the workers run, so workers need no user code.
    """
    check(name, values)
    jobs = built_in()
    if name in jobs:
        given = {p.name: values[p.name] for p in jobs[name].PARAMETERS if values.get(p.name) is not None}
        return jobs[name](**given)
    module_name, _, attribute = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 - the user's module, whatever it raised
        raise UsageError(
            "{setting:job}=%s: cannot import %s: %s" % (name, module_name, raised_by_user_code(e))
        ) from None
    job = getattr(module, attribute, None)
    if not isinstance(job, (Job, Passes)):
        raise UsageError("{setting:job}=%s: %s.%s is not a tf2_mapreduce Job" % (name, module_name, attribute))
    return job
