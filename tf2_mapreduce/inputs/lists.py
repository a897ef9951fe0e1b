"""@lists: files of input paths, one a line. Their lines read, with the errors of the list
itself named; a stream read once, before a listing that could die with its lines."""

import os
import stat

from tf2_mapreduce.errors import InputError, cause_of
from tf2_mapreduce.inputs import lookup
from tf2_mapreduce.inputs.files import tf_error
from tf2_mapreduce.paths import local_path
from tf2_mapreduce.storage import retrying

__all__ = ["lines_of", "read_streams"]


def lines_of(list_path: str, read_before=None) -> list:
    """[(line number, path)] of the @list at `list_path`, blank lines left out; raises
    `InputError` naming the list where it cannot be read. `read_before`: its bytes, or
    the `OSError` reading raised, where `read_streams` read it already. Blocking; an
    outage of remote storage is waited out (`storage.retrying`)."""
    where = "@" + list_path
    if read_before is None and lookup.isdir(list_path):
        raise InputError(where, "is a directory, not a list of paths")
    local = local_path(list_path)

    def read():
        if read_before is not None:
            if isinstance(read_before, OSError):
                raise read_before
            return read_before
        with open(local, "rb") if local is not None else lookup.tf().io.gfile.GFile(list_path, "rb") as f:
            return f.read()

    try:
        data = read() if local is not None else retrying(read, list_path)
    except (FileNotFoundError, tf_error("NotFoundError")):
        raise InputError(where, "no such file or directory") from None
    except (OSError, tf_error()) as e:
        raise InputError(where, cause_of(e)) from None
    lines = [(n, os.fsdecode(line.strip())) for n, line in enumerate(data.splitlines(), 1)]
    return [(n, line) for n, line in lines if line]


def read_streams(specs) -> dict:
    """Reads now each local @list of `specs` that is a stream: a FIFO, a pipe such as
    `@/dev/stdin` or bash's `@<(find ...)`, a terminal; anything but a regular file or a
    directory. Returns {position in `specs`: its bytes, or the `OSError` reading raised},
    for `expand(specs, streams=...)`.

    A stream gives its lines to one reader, once: a listing that reads it and dies takes
    them along, and a second listing of the same specs would then read only what was left,
    short without a word, or wait for ever for a writer that is gone. Read here, the lines
    stay with the caller for any listing that follows. Each is read as `expand` would
    read it, a stream named twice twice."""
    streams = {}
    for n, spec in enumerate(specs):
        local = local_path(spec[1:]) if spec.startswith("@") else None
        if local is None:
            continue
        try:
            mode = os.stat(local).st_mode
        except OSError:
            continue  # `expand` says why
        if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
            continue
        try:
            with open(local, "rb") as f:
                streams[n] = f.read()
        except OSError as e:
            streams[n] = e
    return streams
