"""Paths as the package takes them: a plain local path, or one that names its file system
(gs://, s3://, hdfs://, file://...) for tf.io.gfile; which needs the network; joined."""

__all__ = ["has_scheme", "local_path", "needs_network", "join", "OFFLINE_SCHEMES"]

OFFLINE_SCHEMES = ("file://", "ram://")  # tf.io.gfile file systems that need no network


def has_scheme(path: str) -> bool:
    """Whether `path` names its file system ("gs://b/x", "file:///x"): not a plain local path."""
    return "://" in path


def local_path(path: str) -> str | None:
    """The local file system's path of `path`, or None for a path of another file system."""
    if path.startswith("file://"):
        return path[len("file://") :]
    return None if has_scheme(path) else path


def needs_network(path: str) -> bool:
    """Whether `path` is on a file system reached through the network (gs://, s3://...)."""
    return has_scheme(path) and not path.startswith(OFFLINE_SCHEMES)


def join(directory: str, name: str) -> str:
    """`name` under `directory`, a path of any file system ("gs://b/out/" + "x": "gs://b/out/x")."""
    if not directory:
        return name
    return directory.rstrip("/") + "/" + name
