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


def chunks(chunk_fn, begin, end):
    """Yields the entries [begin, end) of a view on a ps, as lists of what
    `chunk_fn(start, stop)` gives (keys, counts), a chunk at a time of about `CHUNK_BYTES`
    of keys. Blocking."""
    start, step = begin, min(_FIRST_CHUNK, CHUNK)
    while start < end:
        stop = min(start + step, end)
        keys, counts = (part.numpy().tolist() for part in chunk_fn(tf.constant(start), tf.constant(stop)))
        start = stop
        step = _step(keys)
        yield keys, counts


def _step(keys) -> int:
    """How many keys as wide as `keys`, on average, `CHUNK_BYTES` hold (at most `CHUNK`)."""
    width = max(1, sum(map(len, keys)) // max(1, len(keys)))
    return max(1, min(CHUNK, CHUNK_BYTES // width))


def entries(chunked):
    """Every (key, count) of chunks of (keys, counts)."""
    for keys, counts in chunked:
        yield from zip(keys, counts)


def merged(streams, key):
    """Chunks of (keys, counts), each stream's in one order, as chunks of all of them in
    that order (`key(entry)`, the order's sort key), of about `CHUNK_BYTES` of keys each.
    A stream alone is given as it is."""
    if len(streams) == 1:
        yield from streams[0]
        return
    every = heapq.merge(*map(entries, streams), key=key)
    step = min(_FIRST_CHUNK, CHUNK)
    while chunk := list(itertools.islice(every, step)):
        terms = [term for term, _ in chunk]
        step = _step(terms)
        yield terms, [count for _, count in chunk]
