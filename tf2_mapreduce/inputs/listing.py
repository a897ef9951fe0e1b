"""Input specs -> validated files: what a job reads, listed and checked before it runs.

Specs are files, directories, glob patterns and @lists (a file of paths, one a line).
Local paths go through `os` (any bytes in names, no length surprises); every other
path through TensorFlow's file systems, so gs:// and the others work, each call waiting
through an outage of the storage (`storage.retrying`): storage that cannot be reached is
never taken for a missing or empty input. TensorFlow is imported only for those: listing
local paths needs none of it (`listing`).
"""

import functools
import glob
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from tf2_mapreduce.errors import InputError, cause_of
from tf2_mapreduce.inputs import lists, local_stats, lookup
from tf2_mapreduce.inputs.files import Files, Inputs, tf_error
from tf2_mapreduce.inputs.walk import RealPaths, is_hidden, names_and_subdirectories, split_hidden
from tf2_mapreduce.paths import has_scheme, local_path
from tf2_mapreduce.storage import retrying

__all__ = ["ON_ERROR", "GLOB_CHARS", "first_files", "expand"]

GLOB_CHARS = frozenset("*?[")
ON_ERROR = ("fail", "skip")


# Remote stats in flight at once, and at most this many names' results held at a time.
_STATS_IN_FLIGHT = 8
_STATS_AT_ONCE = 1024


def _stat_or_error(path):
    """(`lookup.stat_file(path)`, None), or (None, the `InputError` it raised)."""
    try:
        return lookup.stat_file(path), None
    except InputError as e:
        return None, e


class _Expander:
    def __init__(self, on_error):
        if on_error not in ON_ERROR:
            raise ValueError("on_error must be one of %s" % (ON_ERROR,))
        self.skip = on_error == "skip"
        self.result = Inputs()
        self.paths, self.sizes, self.mtimes = [], [], []  # the files found, as `Files` columns
        # inode (or path) -> the local path met with it, or the set of the real paths of
        # those met with it once a second one came
        self.seen = {}
        self.walked = set()  # (device, inode) of every local directory walked
        self.real_paths = RealPaths()
        self._stats = None  # a ThreadPoolExecutor, once a remote directory is listed

    def problem(self, error):
        """Raises `error`, or with on_error="skip" records it and carries on."""
        if not self.skip:
            raise error
        self.result.skipped.append((error.path, error.reason))

    def _reached(self):
        return len(self.paths) + len(self.result.duplicates) + len(self.result.skipped)

    def add_file(self, path):
        try:
            self._add(path, *lookup.stat_file(path))
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
            self.seen[key] = path if local is None else local  # a str shared with its path
        self.paths.append(path)
        self.sizes.append(size)
        self.mtimes.append(mtime_ns)

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
        """Walks `top` depth first, each directory's files in name order before its
        subdirectories, as `_add_local_directory` does."""
        stack = [top]
        while stack:
            directory = stack.pop()
            try:
                names = sorted(lookup.children(directory))
            except tf_error() as e:
                self.problem(InputError(directory, "cannot list directory: " + cause_of(e)))
                continue
            base = directory if directory.endswith("/") else directory + "/"
            self.result.hidden.extend(base + n for n in names if is_hidden(n.rstrip("/")))
            names = [name for name in names if not is_hidden(name.rstrip("/"))]
            subdirs = []
            for start in range(0, len(names), _STATS_AT_ONCE):
                chunk = names[start : start + _STATS_AT_ONCE]
                files = [base + name for name in chunk if not name.endswith("/")]
                stats = dict(zip(files, self._pool().map(_stat_or_error, files)))
                for name in chunk:
                    if name.endswith("/"):
                        subdirs.append(base + name.rstrip("/"))
                        continue
                    found, error = stats[base + name]
                    if isinstance(error, lookup.Directory):
                        subdirs.append(base + name)
                    elif error is not None:
                        self.problem(error)
                    else:
                        self._add(base + name, *found)
            stack.extend(reversed(subdirs))

    def close(self):
        if self._stats is not None:
            self._stats.shutdown()

    def _pool(self):
        """Threads for a remote directory's stats: each waits on the network (TensorFlow's
        file systems release the GIL), so several at once list a bucket's objects several
        times faster."""
        if self._stats is None:
            self._stats = ThreadPoolExecutor(_STATS_IN_FLIGHT, thread_name_prefix="tf2_mapreduce-stat")
        return self._stats

    def _add_local_directory(self, top, local):
        """Walks `local` depth first, each directory's files in name order before its
        subdirectories: iteratively (a tree thousands deep needs no deeper a stack),
        symbolic links to directories followed, each directory walked once (one reached
        again, through a link or a loop, is a duplicate). The files are statted together
        once the walk is done (`_add_local_files`), what the walk met between them
        (a directory's duplicate or error) kept in its place."""
        prefix = "file://" if local != top else ""  # keep the form the user gave
        stack = [local]
        found = []  # the local paths of the files met, in order
        events = []  # (number of files met before it, what to do then)
        while stack:
            directory = stack.pop()
            try:
                st = os.stat(directory)
                if (st.st_dev, st.st_ino) in self.walked:
                    events.append((len(found), functools.partial(self.result.duplicates.append, prefix + directory)))
                    continue
                self.walked.add((st.st_dev, st.st_ino))
                with os.scandir(directory) as entries:
                    names, subdirs = names_and_subdirectories(entries)
            except OSError as e:
                error = InputError(prefix + directory, "cannot list directory: " + cause_of(e))
                events.append((len(found), functools.partial(self.problem, error)))
                continue
            base = directory if directory.endswith("/") else directory + "/"
            names.sort()
            subdirs.sort()
            names, hidden = split_hidden(names)
            subdirs, hidden_subdirs = split_hidden(subdirs)
            self.result.hidden.extend(prefix + base + n for n in sorted(hidden + hidden_subdirs))
            found.extend([base + name for name in names])
            stack.extend(base + d for d in reversed(subdirs))
        # A file that fails the bulk stat is named as a file, to say why.
        self._add_local_files(prefix, found, lambda n: self.add_file(prefix + found[n]), events)

    def _add_local_files(self, prefix, found, fallback, events=()):
        """Adds the local files `found` (as `prefix` + each), statted in bulk (`local_stats`),
        in order; each that is not a regular file its mode lets us read goes to
        `fallback(its number)` instead. `events`: (n, action) in order, each action run
        just before the n-th file (after the last for n = len(found))."""
        columns = local_stats.stat_files(found)
        keys = local_stats.inode_keys(columns[2], columns[3])
        if not events and columns[4].all() and self._add_new(prefix, found, columns[0], columns[1], keys):
            return
        sizes, mtimes, fine = columns[0].tolist(), columns[1].tolist(), columns[4].tolist()
        events = list(events) + [(len(found) + 1, None)]
        event = 0
        for n, local in enumerate(found):
            while events[event][0] == n:
                events[event][1]()
                event += 1
            if fine[n]:
                self._add(prefix + local, sizes[n], mtimes[n], keys[n])
            else:
                fallback(n)
        for _, action in events[event:-1]:
            action()

    def _add_new(self, prefix, found, sizes, mtimes, keys) -> bool:
        """Adds local files `found` at once if no two are one file and none was met before
        (the usual case: the same as `_add` of each, in a fraction of the time); returns
        whether it did."""
        new = dict(zip(keys, found))
        if len(new) != len(found) or not self.seen.keys().isdisjoint(new):
            return False
        self.seen.update(new)
        self.paths.extend([prefix + local for local in found] if prefix else found)
        self.sizes.extend(sizes.tolist())
        self.mtimes.extend(mtimes.tolist())
        return True

    def add_glob(self, pattern):
        local = local_path(pattern)
        try:
            if local is None:
                matches = sorted(retrying(lambda: lookup.tf().io.gfile.glob(pattern), pattern))
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
            hidden = is_hidden(os.path.basename(match.rstrip("/")))
            (self.result.hidden if hidden else visible).append(match)
        if not visible:
            self.problem(InputError(pattern, "no path matched"))
        for match in visible:
            self.add_path(match)

    def add_path(self, path):
        try:
            found = lookup.stat_file(path)  # one stat for a file, rather than isdir's and then its own
        except lookup.Directory:
            self.add_directory(path)
        except InputError as e:
            self.problem(e)
        else:
            self._add(path, *found)

    def add_list(self, list_path, read_before=None):
        """`read_before`: what `lists.read_streams` read of this list, if it did."""
        where = "@" + list_path
        try:
            lines = lists.lines_of(list_path, read_before)
        except InputError as e:
            self.problem(e)
            return
        if not lines:
            self.problem(InputError(where, "the list holds no paths"))

        def add_line(number, line):
            try:
                self.add_spec(line, allow_list=False)
            except InputError as e:
                raise InputError("%s line %d: %s" % (where, number, e.path), e.reason) from None

        # Runs of plain local paths are statted in bulk; the rest line by line.
        run = []
        for number, line in lines + [(None, None)]:
            if line is not None and not has_scheme(line) and not GLOB_CHARS & set(line):
                run.append((number, line))
                continue
            if run:
                paths = [path for _, path in run]
                self._add_local_files("", paths, lambda n, run=run: add_line(*run[n]))
                run = []
            if line is not None:
                add_line(number, line)

    def add_spec(self, spec, allow_list=True):
        if allow_list and spec.startswith("@"):
            self.add_list(spec[1:])
        elif GLOB_CHARS & set(spec):
            self.add_glob(spec)
        else:
            self.add_path(spec)


def first_files(specs, on_error="fail") -> None:
    """Raises the `InputError` `expand(specs, on_error)` would raise first, where that is
    of a local file named before any directory, pattern, @list or remote spec (a missing
    or unreadable path: a user's most common mistake). One stat and open of each of
    those files: cheap enough to say so before TensorFlow is imported."""
    if on_error != "fail":
        return
    for spec in specs:
        if spec.startswith("@") or GLOB_CHARS & set(spec) or local_path(spec) is None:
            return
        try:
            lookup.stat_file(spec)
        except lookup.Directory:
            return


def expand(specs, on_error="fail", streams=None):
    """Expands input specs into an `Inputs` of regular files, checked readable.

    Specs: a file; a directory (walked recursively, hidden entries skipped); a glob
    pattern; or "@list" (a file of paths, one a line, blank lines ignored, relative
    paths taken from the current directory). A file reached twice is kept once.
    With on_error="fail", raises `InputError` naming the first spec or path that
    cannot be used, a spec that yields nothing included; with "skip", records each
    in `Inputs.skipped` with its reason and goes on. Either way, no input at all
    is an `InputError`. `streams`: @lists read already, as `lists.read_streams` returns them.
    """
    if not specs:
        raise InputError("{setting:input}", "no input given")
    streams = streams or {}
    expander = _Expander(on_error)
    try:
        for n, spec in enumerate(specs):
            if n in streams:
                expander.add_list(spec[1:], streams[n])
            else:
                expander.add_spec(spec)
    finally:
        expander.close()
    expander.result.files = Files(
        expander.paths,
        np.fromiter(expander.sizes, np.int64, len(expander.sizes)),
        np.fromiter(expander.mtimes, np.int64, len(expander.mtimes)),
    )
    if not expander.result.files:
        skipped = expander.result.skipped
        raise InputError(
            ", ".join(specs) if len(specs) < 4 else "%d inputs" % len(specs),
            "no readable input file" + (" (%d skipped, first %s: %s)" % (len(skipped), *skipped[0]) if skipped else ""),
        )
    return expander.result
