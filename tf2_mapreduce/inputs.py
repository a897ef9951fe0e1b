"""Input specs -> validated files: what a job reads, listed and checked before it runs.

Specs are files, directories, glob patterns and @lists (a file of paths, one a line).
Local paths go through `os` (any bytes in names, no length surprises); every other
path through tf.io.gfile, so gs:// and TF's other filesystems work. TensorFlow is
imported only for those: listing local paths needs none of it (`listing`).
"""

import glob
import os
import stat
import sys
from dataclasses import dataclass, field

from tf2_mapreduce.errors import InputError, cause_of

__all__ = ["InputFile", "Inputs", "ON_ERROR", "expand", "encode_path", "local_path", "sample_corpus", "tf_error"]

GLOB_CHARS = frozenset("*?[")
# Whether access() can check for the effective user, as open() does.
_EFFECTIVE_ACCESS = os.access in os.supports_effective_ids
ON_ERROR = ("fail", "skip")


@dataclass(frozen=True, slots=True)  # slots: a million files, a hundred MB less
class InputFile:
    path: str
    size: int
    mtime_ns: int  # recorded in checkpoints, so a resume notices a changed file


@dataclass
class Inputs:
    """The files to process, in a stable order, and what was left out and why."""

    files: list = field(default_factory=list)
    # Names starting with "." or "_" met while walking a directory or matching a
    # glob: hidden files, or markers such as Hadoop's _SUCCESS. Named explicitly,
    # they are counted.
    hidden: list = field(default_factory=list)
    duplicates: list = field(default_factory=list)
    skipped: list = field(default_factory=list)  # (path, reason), with on_error="skip"

    @property
    def total_bytes(self):
        return sum(f.size for f in self.files)


def sample_corpus():
    """The directory of the small sample corpus shipped inside the package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "sample")


def _is_hidden(name):
    return name.startswith((".", "_"))


def _tf():
    import tensorflow as tf

    return tf


class _NeverRaised(Exception):
    pass


def tf_error(name="OpError"):
    """TensorFlow's error class `name` for an except clause, without importing TF:
    while it is not imported, no TF error can have been raised."""
    tf = sys.modules.get("tensorflow")
    return getattr(tf.errors, name) if tf is not None else _NeverRaised


def local_path(path):
    """The local filesystem path of `path`, or None for a path of another filesystem."""
    if path.startswith("file://"):
        return path[len("file://") :]
    return None if "://" in path else path


class _Directory(InputError):
    """A path that is a directory where a file was looked for."""


def _stat_file(path):
    """Returns (size, mtime_ns, inode) of a readable regular file, or raises `InputError`;
    inode is device and inode number in one int for a local file, None on another
    filesystem."""
    local = local_path(path)
    if local is None:
        try:
            st = _tf().io.gfile.stat(path)
        except tf_error("NotFoundError"):
            raise InputError(path, "no such file or directory") from None
        except tf_error() as e:
            raise InputError(path, cause_of(e)) from None
        if st.is_directory:
            raise _Directory(path, "is a directory")
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
        raise _Directory(path, "is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(path, "not a regular file (FIFOs, sockets and devices are not supported)")
    try:
        os.close(os.open(local, os.O_RDONLY))
    except OSError as e:
        raise InputError(path, cause_of(e)) from None
    return st.st_size, st.st_mtime_ns, st.st_dev << 64 | st.st_ino


def _isdir(path):
    local = local_path(path)
    return os.path.isdir(local) if local is not None else _tf().io.gfile.isdir(path)


class _RealPaths:
    """os.path.realpath with the real path of each directory kept: realpath costs a stat
    per path component (5 s for 100,000 files; 1,000,000 symbolic links to the files of
    a directory took 47 s), this one a stat of the last (and a readlink for a link)."""

    def __init__(self):
        self._directories = {}

    def of(self, path, hops=0):
        directory, name = os.path.split(path)
        if name in ("", ".", "..") or hops > 40:  # 40: the kernel's limit on links followed
            return os.path.realpath(path)
        real = self._directories.get(directory)
        if real is None:
            real = self._directories[directory] = os.path.realpath(directory)
        candidate = os.path.join(real, name)
        try:
            target = os.readlink(candidate)
        except OSError:  # not a link (or gone): the path itself
            return candidate
        return self.of(os.path.join(real, target), hops + 1)


class _Expander:
    def __init__(self, on_error):
        if on_error not in ON_ERROR:
            raise ValueError("on_error must be one of %s" % (ON_ERROR,))
        self.skip = on_error == "skip"
        self.result = Inputs()
        # inode (or path) -> the local path met with it, or the set of the real paths of
        # those met with it once a second one came
        self.seen = {}
        self.walked = set()  # (device, inode) of every local directory walked
        self.real_paths = _RealPaths()

    def problem(self, error):
        """Raises `error`, or with on_error="skip" records it and carries on."""
        if not self.skip:
            raise error
        self.result.skipped.append((error.path, error.reason))

    def _reached(self):
        return len(self.result.files) + len(self.result.duplicates) + len(self.result.skipped)

    def add_file(self, path):
        try:
            self._add(path, *_stat_file(path))
        except InputError as e:
            self.problem(e)

    def _add(self, path, size, mtime_ns, inode):
        local = local_path(path)
        key = path if inode is None else inode
        met = self.seen.get(key)
        # A path met before, itself or through a symbolic link, is a duplicate; a hard
        # link is a file of its own. Resolved only when an inode comes back.
        if met is not None:
            if local is None:
                self.result.duplicates.append(path)
                return
            # Each path resolved once: 200 hard links of a file resolved every earlier one
            # each time, 74 s to list 60,000 such files.
            if isinstance(met, str):
                met = self.seen[key] = {self.real_paths.of(met)}
            real = self.real_paths.of(local)
            if real in met:
                self.result.duplicates.append(path)
                return
            met.add(real)
        else:
            self.seen[key] = path if local is None else local  # a str shared with its InputFile
        self.result.files.append(InputFile(path, size, mtime_ns))

    def add_directory(self, top):
        before = self._reached()
        local = local_path(top)
        if local is None:
            self._add_remote_directory(top)
        else:
            self._add_local_directory(top, local)
        if self._reached() == before:
            self.problem(InputError(top, "directory holds no input files"))

    def _add_remote_directory(self, top):
        try:
            for directory, subdirs, names in _tf().io.gfile.walk(top):
                self.result.hidden.extend(os.path.join(directory, n) for n in subdirs + names if _is_hidden(n))
                subdirs[:] = sorted(d for d in subdirs if not _is_hidden(d))
                for name in sorted(names):
                    if not _is_hidden(name):
                        self.add_file(os.path.join(directory, name))
        except tf_error() as e:
            self.problem(InputError(top, "cannot list directory: " + cause_of(e)))

    def _add_local_directory(self, top, local):
        """Walks `local` depth first, each directory's files in name order before its
        subdirectories: iteratively (a tree thousands deep needs no deeper a stack),
        symbolic links to directories followed, each directory walked once (one reached
        again, through a link or a loop, is a duplicate), a stat and an access check per
        file (its open() only to say why one fails them)."""
        prefix = "file://" if local != top else ""  # keep the form the user gave
        stack = [local]
        while stack:
            directory = stack.pop()
            try:
                st = os.stat(directory)
                if (st.st_dev, st.st_ino) in self.walked:
                    self.result.duplicates.append(prefix + directory)
                    continue
                self.walked.add((st.st_dev, st.st_ino))
                with os.scandir(directory) as entries:
                    names, subdirs = [], []
                    for entry in entries:
                        try:
                            is_dir = entry.is_dir()  # of what a link points to, as for a file
                        except OSError:
                            is_dir = False
                        (subdirs if is_dir else names).append(entry.name)
            except OSError as e:
                self.problem(InputError(prefix + directory, "cannot list directory: " + cause_of(e)))
                continue
            base = directory if directory.endswith("/") else directory + "/"
            self.result.hidden.extend(prefix + base + n for n in sorted(subdirs + names) if _is_hidden(n))
            for name in sorted(names):
                if not _is_hidden(name):
                    self._add_local_file(prefix, base + name)
            stack.extend(base + d for d in sorted(subdirs, reverse=True) if not _is_hidden(d))

    def _add_local_file(self, prefix, local):
        try:
            st = os.stat(local)
            fine = stat.S_ISREG(st.st_mode) and os.access(local, os.R_OK, effective_ids=_EFFECTIVE_ACCESS)
        except OSError:
            fine = False
        if fine:
            self._add(prefix + local, st.st_size, st.st_mtime_ns, st.st_dev << 64 | st.st_ino)
        else:
            self.add_file(prefix + local)  # says why, as for a file named

    def add_glob(self, pattern):
        local = local_path(pattern)
        try:
            if local is None:
                matches = sorted(_tf().io.gfile.glob(pattern))
            else:
                # Names starting with "." match too, to be reported as hidden.
                matches = sorted(glob.glob(local, include_hidden=True))
                if local != pattern:
                    matches = ["file://" + m for m in matches]
        except (OSError, tf_error()) as e:
            self.problem(InputError(pattern, cause_of(e)))
            return
        visible = []
        for match in matches:
            hidden = _is_hidden(os.path.basename(match.rstrip("/")))
            (self.result.hidden if hidden else visible).append(match)
        if not visible:
            self.problem(InputError(pattern, "no path matched"))
        for match in visible:
            self.add_path(match)

    def add_path(self, path):
        try:
            found = _stat_file(path)  # one stat for a file, rather than isdir's and then its own
        except _Directory:
            self.add_directory(path)
        except InputError as e:
            self.problem(e)
        else:
            self._add(path, *found)

    def add_list(self, list_path):
        where = "@" + list_path
        if _isdir(list_path):
            self.problem(InputError(where, "is a directory, not a list of paths"))
            return
        local = local_path(list_path)
        try:
            with open(local, "rb") if local is not None else _tf().io.gfile.GFile(list_path, "rb") as f:
                data = f.read()
        except (FileNotFoundError, tf_error("NotFoundError")):
            self.problem(InputError(where, "no such file or directory"))
            return
        except (OSError, tf_error()) as e:
            self.problem(InputError(where, cause_of(e)))
            return
        lines = [(n, os.fsdecode(line.strip())) for n, line in enumerate(data.splitlines(), 1)]
        lines = [(n, line) for n, line in lines if line]
        if not lines:
            self.problem(InputError(where, "the list holds no paths"))
        for number, line in lines:
            try:
                self.add_spec(line, allow_list=False)
            except InputError as e:
                raise InputError("%s line %d: %s" % (where, number, e.path), e.reason) from None

    def add_spec(self, spec, allow_list=True):
        if allow_list and spec.startswith("@"):
            self.add_list(spec[1:])
        elif GLOB_CHARS & set(spec):
            self.add_glob(spec)
        else:
            self.add_path(spec)


def expand(specs, on_error="fail"):
    """Expands input specs into an `Inputs` of regular files, checked readable.

    Specs: a file; a directory (walked recursively, hidden entries skipped); a glob
    pattern; or "@list" (a file of paths, one a line, blank lines ignored, relative
    paths taken from the current directory). A file reached twice is kept once.
    With on_error="fail", raises `InputError` naming the first spec or path that
    cannot be used, a spec that yields nothing included; with "skip", records each
    in `Inputs.skipped` with its reason and goes on. Either way, no input at all
    is an `InputError`.
    """
    if not specs:
        raise InputError("{setting:input}", "no input given")
    expander = _Expander(on_error)
    for spec in specs:
        expander.add_spec(spec)
    if not expander.result.files:
        skipped = expander.result.skipped
        raise InputError(
            ", ".join(specs) if len(specs) < 4 else "%d inputs" % len(specs),
            "no readable input file" + (" (%d skipped, first %s: %s)" % (len(skipped), *skipped[0]) if skipped else ""),
        )
    return expander.result


def encode_path(path):
    """The bytes TensorFlow must be given for `path` (local names may be any bytes)."""
    return os.fsencode(path)
