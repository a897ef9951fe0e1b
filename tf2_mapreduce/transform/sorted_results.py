"""Analyzer results made of every distinct value an analyzer read, taken in order as they
come, never held: a vocabulary's file in tf.Transform's order, and exact quantiles."""

import bisect
import operator
import os
import struct
from dataclasses import dataclass

import numpy as np

from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.outputs import sorted_runs, vocabulary
from tf2_mapreduce.reducers.keys import TFT

__all__ = ["EMPTY_VOCABULARY", "TFT", "ByValue", "VocabularyFile", "Ordered", "Ranked", "decoded"]

# tft's vocabulary of no term (`get_empy_vocabulary_dummy_value`): one dummy term.
EMPTY_VOCABULARY = {"string": b"49d0cd50-04bb-48c0-bc6f-5b575dce351a", "int": b"-1"}


def decoded(dtype, key):
    """A key a value is counted under (`kinds`) as the value it was, of `dtype`."""
    if dtype.is_integer:
        return int(key)
    if dtype == tf.float64:
        return float(np.array(int(key), np.int64).view(np.float64))
    return float(np.array(int(key), np.int64).astype(np.int32).view(np.float32))


class ByValue:
    """Keys of values (as `kinds` counts them) ascending by value (-0.0 before 0.0), then by
    count, as bytes (an `outputs.sorted_runs.Order`, of the native ops too): a value's bits
    made unsigned, in the order of the values; a NaN left out."""

    _VALUE = struct.Struct(">Q")
    _KEY_AT = _VALUE.size + sorted_runs.COUNT.size

    def __init__(self, dtype):
        self._width = 0 if dtype.is_integer else 64 if dtype == tf.float64 else 32
        self.native = {0: 1, 32: 2, 64: 3}[self._width]

    def ordered(self, key: bytes) -> int | None:
        """The unsigned value whose order is that of `key`'s value; None for a NaN's bits
        (every exponent bit set and a fraction not 0)."""
        bits = int(key)  # an integer, or a float's bits as a signed integer
        if not self._width:
            return bits + (1 << 63)
        infinity = {32: 0x7F800000, 64: 0x7FF0000000000000}[self._width]
        if bits & ((1 << (self._width - 1)) - 1) > infinity:
            return None
        if bits < 0:  # a negative float: the greater its bits' magnitude, the less it is
            return -1 - bits
        return bits + (1 << (self._width - 1))

    def keeps(self, entry) -> bool:
        return self.ordered(entry[0]) is not None

    def encode(self, entry) -> bytes:
        key, count = entry
        return self._VALUE.pack(self.ordered(key)) + sorted_runs.COUNT.pack(count) + key

    def decode(self, data: bytes):
        return data[self._KEY_AT :], sorted_runs.COUNT.unpack_from(data, self._VALUE.size)[0]


class Ranked:
    """A quantiles call's values, taken in their order (`order`) a chunk at a time
    (`take`) after the sum of their counts (`open`), its boundaries found as they come."""

    def __init__(self, call):
        self.call, self.order, self.full = call, ByValue(call.dtype), False
        self._buckets = call.params["num_buckets"]
        self._boundaries = np.zeros([1, self._buckets - 1], np.float32)
        self._ranks, self._seen, self._at = [], 0, 0

    def open(self, total):
        self._ranks = [k * total // self._buckets for k in range(1, self._buckets)]
        self.full = not total

    def take(self, keys, counts):
        if not keys:
            return
        seen = self._seen + np.cumsum(np.array(counts, np.int64))
        # Boundary k is the value of the first entry whose running count passes rank k.
        ranks = self._ranks[self._at :]
        reached = ranks[: int(np.searchsorted(ranks, seen[-1], side="left"))]
        for at in np.searchsorted(seen, reached, side="right"):
            self._boundaries[0, self._at] = decoded(self.call.dtype, keys[at])
            self._at += 1
        self._seen = int(seen[-1])
        self.full = self._at == len(self._ranks)

    def close(self):
        pass

    def result(self):
        return self._boundaries


@dataclass(frozen=True)
class VocabularyFile:
    """A vocabulary's result: its file (`path`, a local one, a term a line, as tft writes
    it), how many terms it holds (`size`) and the SHA-256 of its bytes (`sha256`, hex)."""

    path: str
    size: int
    sha256: str


class Ordered:
    """A vocabulary's terms, taken in tft's order (`order`) a chunk at a time (`take`),
    written to its file as they come, as many as its parameters keep."""

    order = TFT

    def __init__(self, call, directory):
        self.call, self.path, self.full = call, os.path.join(directory, call.params["filename"]), False
        self._threshold, self._top_k = call.params["frequency_threshold"], call.params["top_k"]
        self._written = None

    def open(self, total):
        self._written = vocabulary.Lines(self.path)  # as its stream begins: one file open at a time

    def take(self, keys, counts):
        if self.full or not keys:
            return
        kept = len(keys)
        if self._threshold and counts[-1] < self._threshold:  # counts descend: those past it too
            kept = bisect.bisect_right(counts, -self._threshold, key=operator.neg)
            self.full = True
        if self._top_k is not None:
            kept = min(kept, self._top_k - self._written.lines)
            self.full = self.full or self._written.lines + kept == self._top_k
        self._written.extend(keys[:kept])

    def close(self):
        if self._written is not None:  # not made its result: nothing put in place
            self._written.discard()
            self._written = None

    def result(self) -> VocabularyFile:
        written, self._written = self._written or vocabulary.Lines(self.path), None
        if not written.lines:
            written.add(EMPTY_VOCABULARY["int" if self.call.dtype.is_integer else "string"] + b"\n")
        written.close()
        return VocabularyFile(self.path, written.lines, written.sha256.hexdigest())
