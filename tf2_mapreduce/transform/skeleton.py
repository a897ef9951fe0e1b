"""A SavedModel loaded without its assets' bytes: loaded from a copy whose asset files hold
one line each, so that the tables it fills from them as it loads hold nothing here."""

import os
import shutil
import tempfile

from tf2_mapreduce import storage
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.paths import join

__all__ = ["STUB", "Skeleton"]

_ASSETS = "assets"
# What a stand-in asset holds: a line a table of strings or of integers is filled from (not
# none: TensorFlow's kernel fails on an empty file).
STUB = b"0\n"


def _copied(source, target) -> None:
    """Copies the SavedModel at `source` (any file system) into `target` (a local
    directory), each of its asset files a `STUB` of its name. Blocking."""
    top = source.rstrip("/")
    for directory, _, names in tf.io.gfile.walk(top):
        relative = directory[len(top) :].lstrip("/")
        into = os.path.join(target, relative)
        os.makedirs(into, exist_ok=True)
        for name in names:
            if relative.split("/")[0] == _ASSETS:
                with open(os.path.join(into, name), "wb") as f:
                    f.write(STUB)
            else:
                tf.io.gfile.copy(join(directory, name), os.path.join(into, name), overwrite=True)


class Skeleton:
    """The SavedModel at `directory`, loaded (`loaded`) from a local copy whose asset files
    are each a `STUB`. What the loaded objects say of an asset's path is the copy's: `real(path)`
    is where the asset is. `close()` removes the copy. Blocking."""

    def __init__(self, directory: str):
        self._copy = tempfile.mkdtemp(prefix="tf2_mapreduce-skeleton-")
        try:
            storage.retrying(lambda: _copied(directory, self._copy), directory)
            self.loaded = tf.saved_model.load(self._copy)
        except BaseException:
            self.close()
            raise
        self._stub = join(self._copy, _ASSETS) + "/"
        self._real = join(directory, _ASSETS) + "/"

    def is_stub(self, path: str) -> bool:
        """Whether `path` is an asset's of the copy, not its own."""
        return path.startswith(self._stub)

    def real(self, path: str) -> str:
        """Where the asset the copy knows as `path` is; any other path as it is."""
        return self._real + path[len(self._stub) :] if self.is_stub(path) else path

    def close(self) -> None:
        shutil.rmtree(self._copy, ignore_errors=True)
