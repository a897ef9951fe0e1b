"""`transform`: tf.Transform's analyze-and-transform of tf.train.Example records, as a
declarative object (the runner is `tf2_mapreduce.transform.run`): a preprocessing_fn, the
raw examples' schema, and how many files the transformed examples are written in."""

import functools
import importlib
import importlib.util
import inspect
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from tf2_mapreduce.errors import UsageError, raised_by_user_code
from tf2_mapreduce.jobs.base import Parameter
from tf2_mapreduce.jobs.reshard import parse_num_shards
from tf2_mapreduce.paths import local_path
from tf2_mapreduce.run.passes import Passes

__all__ = [
    "Transform",
    "function_of",
    "check_given",
    "check_findable",
    "check_transform_output",
    "check_apart",
    "parse_custom_config",
]


def _check_function(text):
    if ":" not in str(text):
        raise UsageError("{setting:preprocessing_fn}=%s: give MODULE:FUNCTION (a module on the path)" % (text,))


def function_of(text) -> Callable:
    """The function "package.module:FUNCTION" names, imported. Raises `UsageError`."""
    _check_function(text)
    module_name, _, attribute = text.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 - the user's module, whatever it raised
        raise _unimportable(text, module_name, e) from None
    function = getattr(module, attribute, None)
    if not callable(function):
        raise UsageError("{setting:preprocessing_fn}=%s: %s.%s is not a function" % (text, module_name, attribute))
    return function


def parse_custom_config(text) -> dict:
    """`--custom_config` (a JSON object) as a dict; raises `UsageError`."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError) as e:
        raise UsageError("{setting:custom_config}: not JSON: %s" % e) from None
    if not isinstance(value, dict):
        raise UsageError("{setting:custom_config}: give a JSON object ({...}), not %s" % type(value).__name__)
    return value


def _with_config(function, custom_config):
    """`function` called as TFX's Transform calls it: with `custom_config=` where it takes
    an argument of that name (then `{}` where none was given)."""
    try:
        takes = "custom_config" in inspect.signature(function).parameters
    except (TypeError, ValueError):  # a builtin, say: no signature to read
        takes = False
    if takes:
        return functools.partial(function, custom_config={} if custom_config is None else custom_config)
    if custom_config is not None:
        raise UsageError(
            "{setting:custom_config} given, but the preprocessing_fn takes no custom_config argument "
            "(def preprocessing_fn(inputs, custom_config))"
        )
    return function


def _unimportable(text, module_name, cause) -> UsageError:
    """What `function_of` and `check_findable` say of a module that cannot be imported."""
    cause = cause if isinstance(cause, str) else raised_by_user_code(cause)
    return UsageError("{setting:preprocessing_fn}=%s: cannot import %s: %s" % (text, module_name, cause))


def check_given(preprocessing_fn, transform_output, schema=None, custom_config=None) -> None:
    """Raises `UsageError` unless one of `preprocessing_fn` (analyze and transform) and
    `transform_output` (apply an earlier transform) is given, and with the latter neither
    a `schema` (it has its raw schema) nor a `custom_config`."""
    if (preprocessing_fn is None) == (transform_output is None):
        raise UsageError(
            "{setting:job}=transform needs {setting:preprocessing_fn} (to analyze and transform) or "
            "{setting:transform_output} (to apply an earlier transform), one of the two"
        )
    if transform_output is not None and (schema is not None or custom_config is not None):
        raise UsageError(
            "{setting:transform_output} applies an earlier transform as it was written, over the raw schema "
            "written with it: give no {setting:schema} or {setting:custom_config}"
        )


def check_findable(preprocessing_fn: str, schema: str | None) -> None:
    """Raises `UsageError` where the module of `preprocessing_fn` ("module:FUNCTION")
    cannot be found or a local `schema` file cannot be read, without importing the
    module (it imports TensorFlow: seconds) or TensorFlow: the CLI says these at once.
    What only an import tells (the function itself) is `function_of`'s."""
    top = preprocessing_fn.partition(":")[0].split(".")[0]
    try:
        found = importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise _unimportable(preprocessing_fn, top, "No module named %r" % top)
    path = local_path(schema) if schema else None
    if path is not None:
        try:
            with open(path, "rb"):
                pass
        except OSError as e:
            raise UsageError("{setting:schema} %s: cannot be read: %s" % (schema, e.strerror)) from None


def check_apart(transform_output: str, output_dir: str) -> None:
    """Raises `UsageError` where `output_dir` is `transform_output`, or holds it, or is in
    it: the result replaces its directory whole, and the transform read would be lost."""

    def parts(path):
        local = local_path(path)
        return (os.path.abspath(local) if local is not None else path.rstrip("/")).split("/")

    a, b = parts(transform_output), parts(output_dir)
    if a[: len(b)] == b or b[: len(a)] == a:
        raise UsageError(
            "{setting:output_dir} %s and {setting:transform_output} %s: the output replaces its directory whole; "
            "write it apart from the transform it applies" % (output_dir, transform_output)
        )


def check_transform_output(directory: str) -> None:
    """Raises `UsageError` where `directory`, on the local file system, holds no transform
    (transform_fn/ and the raw schema beside it), without importing TensorFlow; one on
    another file system is read when the job starts."""
    path = local_path(directory)
    if path is None:
        return
    for needed in ("transform_fn/saved_model.pb", "metadata/schema.pbtxt"):
        if not os.path.isfile(os.path.join(path, needed)):
            raise UsageError(
                "{setting:transform_output} %s: no %s: not the output of a transform" % (directory, needed)
            )


@dataclass(frozen=True)
class Transform(Passes):
    """tf.Transform's AnalyzeAndTransformDataset and WriteTransformFn in one job: every
    tf.train.Example of the inputs transformed by `preprocessing_fn` (a function of a
    dict of raw features written against `tf2_mapreduce.transform`, or "module:FUNCTION")
    and written once, in input order, in `num_shards` files of the output directory's
    data/ (0: one per 128 MiB), beside transform_fn/ and transformed_metadata/. `schema`:
    the raw examples' (a tensorflow-metadata Schema, a path to one in text format, or a
    feature spec {name: tf.io.FixedLenFeature | tf.io.VarLenFeature | tf.io.RaggedFeature}); None: inferred
    from the data as TFDV does. Given or inferred, it is written as metadata/schema.pbtxt,
    where TFX writes it (tft's `raw_feature_spec()` reads it).

    `transform_output` (in place of `preprocessing_fn`): the output directory of an earlier
    transform, whose transform_fn is applied to every example, with no analysis, as
    tf.Transform's TransformDataset (the eval and test splits); data/ then holds them,
    beside a copy of that transform's transformed_metadata/."""

    COMMAND: ClassVar[str] = "transform"
    RUNNER: ClassVar[str] = "tf2_mapreduce.transform.run"
    SUMMARY: ClassVar[str] = "tf.Transform's analyze-and-transform: every example transformed, written once"
    PARAMETERS: ClassVar[tuple] = (
        Parameter(
            "preprocessing_fn", "MODULE:FUNCTION, written against tf2_mapreduce.transform", check=_check_function
        ),
        Parameter(
            "transform_output",
            "the output directory of an earlier transform: its transform_fn applied alone, no analysis "
            "(tf.Transform's TransformDataset: the eval and test splits)",
        ),
        Parameter("schema", "the raw examples' tensorflow-metadata Schema, text format (default: inferred)"),
        Parameter("num_shards", "files of data/ to write (default: one per 128 MiB written)", check=parse_num_shards),
        Parameter(
            "custom_config",
            "a JSON object, passed as preprocessing_fn(inputs, custom_config) as TFX's Transform passes it",
            check=parse_custom_config,
        ),
    )

    preprocessing_fn: object = None
    schema: object = None
    num_shards: object = 0
    name: str = "transform"
    custom_config: object = None
    transform_output: str | None = None

    def __post_init__(self):
        check_given(self.preprocessing_fn, self.transform_output, self.schema, self.custom_config)
        self._check_num_shards()
        if self.transform_output is not None:
            return
        if isinstance(self.preprocessing_fn, str):
            object.__setattr__(self, "preprocessing_fn", function_of(self.preprocessing_fn))
        if not callable(self.preprocessing_fn):
            raise TypeError("preprocessing_fn must be a function, not %r" % (self.preprocessing_fn,))
        if isinstance(self.custom_config, str):
            object.__setattr__(self, "custom_config", parse_custom_config(self.custom_config))
        object.__setattr__(self, "preprocessing_fn", _with_config(self.preprocessing_fn, self.custom_config))

    def check(self) -> None:
        """Its map steps need the native ops: raises `UsageError` where they cannot be loaded."""
        from tf2_mapreduce import native

        if native.unavailable():
            raise UsageError("{setting:job}=transform needs the native ops: %s" % native.unavailable())

    def _check_num_shards(self):
        if isinstance(self.num_shards, str):
            object.__setattr__(self, "num_shards", parse_num_shards(self.num_shards))
        if not isinstance(self.num_shards, int) or self.num_shards < 0:
            raise ValueError("num_shards must be an int >= 0 (0: by size), not %r" % (self.num_shards,))
