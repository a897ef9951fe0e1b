"""How a job runs and how a cluster is driven: every setting's default, in one place, for
the Python API and the CLI's flags alike. Free of TensorFlow: the CLI defines its flags
from these before it imports TensorFlow."""

from dataclasses import dataclass, fields

__all__ = ["Options", "ClusterSettings"]


@dataclass(frozen=True)
class Options:
    """How a job runs; `Cluster.run` and `Cluster.submit` take these as keywords."""

    split_size: int = 64 << 20  # at most this many bytes per map step
    read_size: int = 8 << 20  # files are cut into pieces of about this size, read one at a time
    max_pieces: int = 0  # pieces per map step at most; 0: up to rounds.MAX_PIECES_PER_STEP
    on_error: str = "fail"  # "fail": stop at the first unreadable input; "skip": leave it out, say so
    format: str = "auto"  # what the inputs are: a format of inputs.formats.NAMES, or "auto": what the job reads
    compression: str = "auto"  # "none", "gzip", "zlib", or "auto": by each file's name
    checkpoint_dir: str | None = None
    output_dir: str | None = None  # where a job that writes records writes them as it runs (`outputs.sinks.Records`)
    checkpoint_every: float = 30.0
    worker_timeout: float = 300.0  # give up after this long without progress while a worker is down
    storage_timeout: float = 600.0  # wait this long for storage that cannot be reached, then stop (resumable)
    progress_every: float = 2.0

    @classmethod
    def of(cls, **options) -> "Options":
        """Options from keywords; raises `TypeError` naming any that is not an option."""
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise TypeError("unknown option(s) %s; the options are %s" % (", ".join(unknown), ", ".join(known)))
        return cls(**options)


@dataclass(frozen=True)
class ClusterSettings:
    """How a `Cluster` is driven; it takes these as keywords."""

    keep_serving: bool = False  # leave the servers running when the cluster is left
    connect_timeout: float = 60.0  # seconds for every ps and worker to accept connections
    shutdown_timeout: float = 30.0  # seconds to keep telling a task that does not answer that the job is over
    verbose: bool = False  # show TensorFlow's native start-up lines
