"""TensorFlow ops of our own (`native/*.cc`): built from C++ against the installed
TensorFlow on a machine's first run, cached, loaded, and whether a job may use them.

`TF2_MAPREDUCE_NATIVE` says what to do: `auto` (the default) builds them, or falls back
to TensorFlow's own ops with one warning naming what is weaker; `require` fails with an
error where they cannot be built or loaded, on any task; `off` never uses them. Why not
at install time: the build needs TensorFlow's headers, and pip builds in an environment
of its own without them. Every process that runs a map step (each server, and the
coordinator for an in-process cluster) loads the library before it does.
"""

import fcntl
import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import tempfile
import time

from tf2_mapreduce import log
from tf2_mapreduce.errors import UsageError, op_error_cause

__all__ = ["ENV", "MODES", "WEAKER", "mode", "cache_dir", "load", "built_here", "unavailable", "disable", "missing_on"]

ENV = "TF2_MAPREDUCE_NATIVE"
MODES = ("auto", "require", "off")
# Compiled as one unit (`_unit`): a name defined in two of them is a build error.
SOURCES = (
    "example_features.cc",
    "record_dataset.cc",
    "text_chunks.cc",
    "key_count_table.cc",
    "read_range.cc",
    "merge_counts.cc",
    "encode_examples.cc",
    "record_cuts.cc",
    "words.cc",
    "write_records.cc",
    "join_files.cc",
    "sorted_entries.cc",
    "source.cc",
    "example_wire.cc",
)
# Included by sources: part of the build's digest, not compiled apart.
HEADERS = ("key_counts.h", "storage_status.h", "source.h", "record_framing.h", "example_wire.h")
# -O3: the word counter's loop is counted many bytes at a time only when vectorized.
OPTIONS = ("-std=c++17", "-fPIC", "-O3", "-w")  # -w: TensorFlow's headers warn by the hundred
PROGRESS_EVERY = 10.0  # seconds between the lines that say a build is still going
# Seconds a build takes on one core, for an honest estimate (measured on this project's
# machine: 17-18 s, TensorFlow's import and the link included).
BUILD_SECONDS = 20
NATIVE_DIR = os.path.dirname(os.path.abspath(__file__))
# What a job loses without them (docs/runtime.md, D1-D2 and "Range reads").
WEAKER = (
    "a byte range of a large file is read from the start of the file and words are counted by "
    "TensorFlow's own ops (slower, same results); gzip/zlib-compressed and TFRecord inputs are "
    "refused, since TensorFlow's own readers read a truncated one short without an error"
)
_FRAMEWORK = "libtensorflow_framework.so.2"
_loaded = {}


def mode() -> str:
    """`TF2_MAPREDUCE_NATIVE`, checked: auto (unset or empty), require or off."""
    value = os.environ.get(ENV) or "auto"
    if value not in MODES:
        raise UsageError("%s=%s: use one of %s" % (ENV, value, ", ".join(MODES)))
    return value


def cache_dir() -> str:
    """Where built libraries are kept: $TF2_MAPREDUCE_CACHE, else $XDG_CACHE_HOME/tf2_mapreduce, else ~/.cache/tf2_mapreduce."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.environ.get("TF2_MAPREDUCE_CACHE") or os.path.join(base, "tf2_mapreduce")


def _tensorflow_dir():
    """TensorFlow's package directory, found without importing it."""
    return importlib.util.find_spec("tensorflow").submodule_search_locations[0]


def _tensorflow_version():
    """TensorFlow's version as its distribution says, without importing it."""
    for name in importlib.metadata.packages_distributions().get("tensorflow", ()):
        return importlib.metadata.version(name)
    return "?"


def _library_path():
    """The library built from these sources for this TensorFlow: named by a digest of the
    sources, the options and TensorFlow's framework library (its path, size and time), so
    that a new TensorFlow gets a new build. Found without importing TensorFlow."""
    framework = os.path.realpath(os.path.join(_tensorflow_dir(), _FRAMEWORK))
    st = os.stat(framework)
    digest = hashlib.sha256(("%s %d %d %s" % (framework, st.st_size, st.st_mtime_ns, " ".join(OPTIONS))).encode())
    for name in SOURCES + HEADERS:
        with open(os.path.join(NATIVE_DIR, name), "rb") as f:
            digest.update(f.read())
    return os.path.join(cache_dir(), "ops-%s.so" % digest.hexdigest()[:20])


def _compiler():
    return os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")


def _failure(compiler, returncode, errors):
    lines = [line for line in errors.splitlines() if "error:" in line]
    return "%s failed: %s" % (os.path.basename(compiler), lines[0] if lines else "exit %d" % returncode)


def _unit(directory):
    """One translation unit that includes every source: TensorFlow's headers, most of what
    a source costs to compile, are parsed once (15 s of one core, where the sources
    compiled apart took 73: 41-45 s on 2 cores). Written in `directory`; returns its path."""
    unit = os.path.join(directory, "ops.cc")
    with open(unit, "w") as f:
        f.writelines('#include "%s"\n' % os.path.join(NATIVE_DIR, name) for name in SOURCES)
    return unit


def _compile(directory, on_wait):
    """Compiles and links every source into `directory`/ops.so; returns its path, or why
    not. Calls `on_wait(seconds)` every `PROGRESS_EVERY` s while the compiler runs."""
    import tensorflow as tf

    compiler = _compiler()
    if not compiler:
        return None, "no C++ compiler (g++ or $CXX) found"
    library = os.path.join(directory, "ops.so")
    command = [compiler, *OPTIONS, "-shared", _unit(directory), "-o", library]
    command += [*tf.sysconfig.get_compile_flags(), *tf.sysconfig.get_link_flags()]
    # To a file, not a pipe: a template error can outgrow a pipe's buffer while we wait.
    with open(os.path.join(directory, "errors"), "w+") as errors:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors)
        started = time.monotonic()
        while True:
            try:
                process.wait(timeout=PROGRESS_EVERY)
                break
            except subprocess.TimeoutExpired:
                on_wait(time.monotonic() - started)
        errors.seek(0)
        return (None, _failure(compiler, process.returncode, errors.read())) if process.returncode else (library, None)


def _build(path, on_wait):
    """Builds the library at `path`, once across processes; returns None or why not."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".lock", "w") as lock:
        # Servers of a local cluster start together: one builds, the others wait for it.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(path):
            return None
        with tempfile.TemporaryDirectory(dir=os.path.dirname(path), prefix="build-") as directory:
            library, why = _compile(directory, on_wait)
            if why is None:
                os.replace(library, path)  # atomic: a reader never loads a half-written library
    return why


def _build_announced(path):
    """`_build`, said before, while (a line every `PROGRESS_EVERY` s) and after: it takes
    tens of seconds, once per machine."""
    version = ".".join(_tensorflow_version().split(".")[:2])
    log.info("building the native ops for TensorFlow %s: once per machine, about %d s..." % (version, BUILD_SECONDS))
    started = time.monotonic()

    def on_wait(seconds):
        log.info("still building the native ops: %.0f s" % seconds)

    why = _build(path, on_wait)
    if why is None:
        _loaded["built"] = time.monotonic() - started
        log.info("built the native ops in %.1f s (cached in %s)" % (_loaded["built"], os.path.dirname(path)))
    return why


def _load():
    """(library or None, why not)."""
    if mode() == "off":
        return None, "%s=off" % ENV
    path = _library_path()
    try:
        why = None if os.path.exists(path) else _build_announced(path)
    except OSError as e:
        why = "cannot build them in %s: %s" % (os.path.dirname(path), e)
    if why is not None:
        return None, why
    import tensorflow as tf

    try:
        return tf.load_op_library(path), None
    except (tf.errors.OpError, OSError) as e:
        return None, "loading %s failed: %s" % (path, e)


def load():
    """The op library (its ops as functions: `tf2_mapreduce_read_range`,
    `tf2_mapreduce_read_files`, `tf2_mapreduce_file_sizes`, `tf2_mapreduce_count_words`,
    `tf2_mapreduce_word_counts`, `tf2_mapreduce_example_stat_keys`,
    `tf2_mapreduce_merge_counts`, the per-key table `tf2_mapreduce_key_count_table` and its
    `tf2_mapreduce_key_count_commit`, the writers `tf2_mapreduce_write_records` and
    `tf2_mapreduce_join_files`, `tf2_mapreduce_sorted_entries` (a table's entries sorted on its ps), and the dataset ops that `inputs.readers` wraps), or None
    where a job goes without it (`unavailable()` says why). Blocking: the first call on
    a machine builds it (tens of seconds, said on the log); later ones load it from the
    cache. Raises `UsageError` with `TF2_MAPREDUCE_NATIVE=require` if it cannot be had."""
    if "ops" not in _loaded:
        _loaded["ops"], _loaded["why"] = _load()
        if _loaded["ops"] is None and mode() == "auto":
            log.warning("going without tf2_mapreduce's native ops (%s). So %s" % (_loaded["why"], WEAKER))
    if _loaded["ops"] is None and mode() == "require":
        raise UsageError("%s=require, but tf2_mapreduce's native ops cannot be used here: %s" % (ENV, _loaded["why"]))
    return _loaded["ops"]


def built_here() -> bool:
    """Whether this process built the library (its first run on the machine)."""
    return "built" in _loaded


def unavailable():
    """None if jobs use the library, else why not."""
    load()
    return _loaded["why"]


def disable(why: str) -> None:
    """Makes every job of this process go without the library from now on (`why`): map
    steps are traced here, so one that a task of the cluster cannot run must not use it."""
    _loaded["ops"], _loaded["why"] = None, why


def missing_on(device: str):
    """None if the task of `device` can run the native ops, else TensorFlow's word for why
    not: a task whose process did not load them (no compiler on its host, or
    TF2_MAPREDUCE_NATIVE=off there) cannot run one. Blocking: one tiny op on that task;
    only with the library loaded here (`load()`)."""
    import tensorflow as tf

    library = load()
    try:
        with tf.device(device):
            library.tf2_mapreduce_file_sizes(tf.constant([], tf.string)).numpy()
    except tf.errors.NotFoundError as e:
        return op_error_cause(e)
    return None
