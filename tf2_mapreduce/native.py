"""TensorFlow ops of our own (`native/*.cc`): built from C++ against the installed
TensorFlow with the system's C++ compiler on first use, cached, and loaded.

Why not at install time: the build needs TensorFlow's headers, and pip builds in an
environment of its own without them. Every process that runs a map step (each server,
and the coordinator for an in-process cluster) loads the library before it does.
"""

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile

import tensorflow as tf

__all__ = ["load", "unavailable", "cache_dir"]

SOURCES = ("read_range.cc", "words.cc", "text_stream.cc")
# -O3: the word counter's loop is counted many bytes at a time only when vectorized.
OPTIONS = ("-std=c++17", "-shared", "-fPIC", "-O3", "-w")  # -w: TensorFlow's headers warn by the hundred
NATIVE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "native")
_loaded = {}


def cache_dir() -> str:
    """Where built libraries are kept: $TF2_MAPREDUCE_CACHE, else ~/.cache/tf2_mapreduce."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.environ.get("TF2_MAPREDUCE_CACHE") or os.path.join(base, "tf2_mapreduce")


def _command(sources, output):
    compiler = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not compiler:
        return None
    return [
        compiler,
        *OPTIONS,
        *sources,
        "-o",
        output,
        *tf.sysconfig.get_compile_flags(),
        *tf.sysconfig.get_link_flags(),
    ]


def _build(path):
    """Builds the library at `path`, once across processes; returns None or why not."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".lock", "w") as lock:
        # Servers of a local cluster start together: one builds, the others wait for it.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(path):
            return None
        fd, partial = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".so")
        os.close(fd)
        command = _command([os.path.join(NATIVE_DIR, name) for name in SOURCES], partial)
        if command is None:
            os.unlink(partial)
            return "no C++ compiler (g++ or $CXX) found"
        built = subprocess.run(command, capture_output=True, text=True)
        if built.returncode:
            os.unlink(partial)
            lines = [line for line in built.stderr.splitlines() if "error:" in line] or built.stderr.splitlines()
            return "%s failed: %s" % (os.path.basename(command[0]), lines[0] if lines else "exit %d" % built.returncode)
        os.replace(partial, path)  # atomic: a reader never loads a half-written library
    return None


def _library_path():
    digest = hashlib.sha256(" ".join((tf.__version__,) + OPTIONS).encode())
    for name in SOURCES:
        with open(os.path.join(NATIVE_DIR, name), "rb") as f:
            digest.update(f.read())
    return os.path.join(cache_dir(), "ops-%s-%s.so" % (tf.__version__, digest.hexdigest()[:16]))


def load():
    """The op library (its ops as functions: `tf2_mapreduce_read_range`,
    `tf2_mapreduce_count_words`, `tf2_mapreduce_word_counts`, and the dataset ops
    `tf2_mapreduce_text_chunk_dataset` and `tf2_mapreduce_record_dataset`, which
    text_stream.chunks and text_stream.records wrap), or None
    if it cannot be built or loaded here (`unavailable()` says why). Blocking: the first
    call on a machine builds it (tens of seconds); later ones load it from the cache."""
    if "ops" not in _loaded:
        path = _library_path()
        try:
            why = None if os.path.exists(path) else _build(path)
        except OSError as e:
            why = "cannot build it in %s: %s" % (os.path.dirname(path), e)
        library = None
        if why is None:
            try:
                library = tf.load_op_library(path)
            except (tf.errors.OpError, OSError) as e:
                why = "loading %s failed: %s" % (path, e)
        _loaded["ops"], _loaded["why"] = library, why
    return _loaded["ops"]


def unavailable():
    """None if `load()` loaded the library, else why it could not."""
    load()
    return _loaded["why"]
