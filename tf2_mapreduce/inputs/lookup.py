"""What one input path is, asked of its file system: a readable regular file (size, time,
inode) or a directory, and a directory's names. Local paths through `os`; the others
through TensorFlow, each call waiting through an outage of the storage (`storage.retrying`),
never taken for a missing or empty path."""

import os
import stat

from tf2_mapreduce.errors import InputError, cause_of
from tf2_mapreduce.inputs import local_stats
from tf2_mapreduce.inputs.files import tf_error
from tf2_mapreduce.paths import local_path
from tf2_mapreduce.storage import retrying

__all__ = ["Directory", "stat_file", "isdir", "children", "tf"]


def tf():
    import tensorflow as tf

    return tf


class Directory(InputError):
    """A path that is a directory where a file was looked for."""


def stat_file(path):
    """Returns (size, mtime_ns, inode) of a readable regular file, or raises `InputError`;
    inode is device and inode number as 16 bytes (`local_stats.inode_key`) for a local file, None
    on another filesystem."""
    local = local_path(path)
    if local is None:
        try:
            st = retrying(lambda: tf().io.gfile.stat(path), path)
        except tf_error("NotFoundError"):
            raise InputError(path, "no such file or directory") from None
        except tf_error() as e:
            raise InputError(path, cause_of(e)) from None
        if st.is_directory:
            raise Directory(path, "is a directory")
        return st.length, st.mtime_nsec, None
    try:
        st = os.stat(local)
    except FileNotFoundError:
        raise InputError(
            path, "broken symbolic link" if os.path.islink(local) else "no such file or directory"
        ) from None
    except OSError as e:
        raise InputError(path, cause_of(e)) from None
    if stat.S_ISDIR(st.st_mode):
        raise Directory(path, "is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(path, "not a regular file (FIFOs, sockets and devices are not supported)")
    try:
        os.close(os.open(local, os.O_RDONLY))
    except OSError as e:
        raise InputError(path, cause_of(e)) from None
    return st.st_size, st.st_mtime_ns, local_stats.inode_key(st.st_dev, st.st_ino)


def isdir(path):
    local = local_path(path)
    if local is not None:
        return os.path.isdir(local)
    try:  # not gfile.isdir, which answers False for storage it cannot reach
        return retrying(lambda: tf().io.gfile.stat(path), path).is_directory
    except tf_error():
        return False


def children(directory):
    """The names in a directory of another file system, a subdirectory's ending in "/"
    where the file system says so (Cloud Storage does). Not gfile.listdir or walk, which
    answer "not found" or nothing for storage they cannot reach."""
    from tensorflow.python.lib.io import _pywrap_file_io  # what gfile.listdir calls, its errors kept

    return retrying(lambda: _pywrap_file_io.GetChildren(directory.encode("utf-8", "surrogateescape")), directory)
