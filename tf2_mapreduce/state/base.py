"""What every kind of a run's state on the ps tasks shares: its progress figures, what a
checkpoint saves of it, and freeing it on the ps.

A run's state belongs to that run: every resource it places on a ps is new, named for
the run, so nothing an earlier coordinator left on a server that outlived it (a kept
server, a rerun after a crash) can reach its result (docs/runtime.md, R1-R5).
"""

import functools
from dataclasses import dataclass

import tensorflow as tf

__all__ = ["Figures", "CheckpointState", "destroy", "run_function"]


def run_function(fn, **options):
    """`tf.function(fn, autograph=False, **options)` for one run: traced anew in every
    run, by design, since each run's resources are new. TensorFlow counts the traces of
    a function by its code, which every run shares, and after a few jobs in a process
    warns on stderr of "excessive retracing"; a `functools.partial` has no code of its
    own, so TensorFlow counts its traces apart, one per run."""
    return tf.function(functools.partial(fn), autograph=False, **options)


@dataclass(frozen=True)
class Figures:
    """A state's figures so far: pieces and bytes committed, and the value folded on the
    ps tasks (the reducer's own: an int64 or vector as numpy for a per-piece fold, the
    total of the counts for a per-key sum) with the distinct keys of a per-key sum."""

    pieces_done: int
    bytes_done: int
    value: object
    distinct: int = None


@dataclass(frozen=True)
class CheckpointState:
    """What to checkpoint: objects saved by name, the live objects restored under the
    same names, and a function that makes the saved ones consistent first."""

    save: dict
    restore: dict
    prepare: object = None


def destroy(handles):
    """Frees resources on the ps tasks now, rather than when their server exits:
    a server kept for later jobs would otherwise hold every finished run's state."""
    for handle in handles:
        tf.raw_ops.DestroyResourceOp(resource=handle, ignore_lookup_error=True)
