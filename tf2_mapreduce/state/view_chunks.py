"""A table's view on a ps read a chunk at a time: in chunks sized by the keys' width, so
that the coordinator holds about as many bytes whatever the keys; sorted views merged."""

import heapq
import itertools

import tensorflow as tf

__all__ = ["CHUNK", "CHUNK_BYTES", "chunks", "entries", "merged"]

CHUNK = 200_000  # table entries fetched from a ps at a time, at most
# And about this many bytes of keys: a chunk of keys a kilobyte each (a vocabulary of long
# terms) was 200 MB held twice, as a tensor and as numpy's, on the coordinator.
CHUNK_BYTES = 16 << 20
_FIRST_CHUNK = 1_000  # entries fetched before the keys' width is known


def chunks(chunk_fn, size):
    """Yields a view of `size` entries on a ps, as lists of what `chunk_fn(start, end)`
    gives (keys, counts), a chunk at a time of about `CHUNK_BYTES` of keys. Blocking."""
    start, step = 0, min(_FIRST_CHUNK, CHUNK)
    while start < size:
        end = min(start + step, size)
        keys, counts = (part.numpy().tolist() for part in chunk_fn(tf.constant(start), tf.constant(end)))
        start = end
        # As many as CHUNK_BYTES of keys as wide as these, on average, hold.
        width = max(1, sum(map(len, keys)) // max(1, len(keys)))
        step = max(1, min(CHUNK, CHUNK_BYTES // width))
        yield keys, counts


def entries(chunked):
    """Every (key, count) of chunks of (keys, counts)."""
    for keys, counts in chunked:
        yield from zip(keys, counts)


def merged(streams, key):
    """Chunks of (keys, counts), each stream's in one order, as chunks of all of them in
    that order (`key(entry)`, the order's sort key). A stream alone is given as it is."""
    if len(streams) == 1:
        yield from streams[0]
        return
    every = heapq.merge(*map(entries, streams), key=key)
    while chunk := list(itertools.islice(every, CHUNK)):
        yield [key for key, _ in chunk], [count for _, count in chunk]
