"""Analyzer results made of every distinct value an analyzer read, sorted as they come in
bounded memory: a vocabulary's file in tf.Transform's order, and exact quantiles."""

import itertools
import os
import struct
from dataclasses import dataclass

import numpy as np

from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.outputs import sorted_runs, vocabulary
from tf2_mapreduce.reducers.keys import TftOrder

__all__ = ["EMPTY_VOCABULARY", "VocabularyFile", "Ordered", "Ranked", "decoded"]

# tft's vocabulary of no term (`get_empy_vocabulary_dummy_value`): one dummy term.
EMPTY_VOCABULARY = {"string": b"49d0cd50-04bb-48c0-bc6f-5b575dce351a", "int": b"-1"}


def decoded(dtype, key):
    """A key a value is counted under (`kinds`) as the value it was, of `dtype`."""
    if dtype.is_integer:
        return int(key)
    if dtype == tf.float64:
        return float(np.array(int(key), np.int64).view(np.float64))
    return float(np.array(int(key), np.int64).astype(np.int32).view(np.float32))


class _ByValue:
    """Keys of values (as `kinds` counts them) ascending by value (-0.0 before 0.0), then by count, as
    bytes (an `outputs.sorted_runs.Order`): a value's bits made unsigned, in the order of the
    values (`ordered`, None for a NaN, left out before). An entry is (key, count, ordered):
    a key's int parsed once."""

    _VALUE = struct.Struct(">Q")
    _KEY_AT = _VALUE.size + sorted_runs.COUNT.size

    def __init__(self, dtype):
        self._width = 0 if dtype.is_integer else 64 if dtype == tf.float64 else 32

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

    def encode(self, entry) -> bytes:
        key, count, ordered = entry
        return self._VALUE.pack(ordered) + sorted_runs.COUNT.pack(count) + key

    def decode(self, data: bytes):
        return data[self._KEY_AT :], sorted_runs.COUNT.unpack_from(data, self._VALUE.size)[0]


class Ranked:
    """A quantiles call's values, sorted as they come, then walked once for its boundaries."""

    def __init__(self, call, held):
        self.call, self.n = call, 0
        self._order = _ByValue(call.dtype)
        self._sorted = sorted_runs.SortedRuns(order=self._order, held=held)

    def add(self, key, count):
        ordered = self._order.ordered(key)
        if ordered is None:
            return
        self.n += count
        self._sorted.add((key, count, ordered))

    def close(self):
        self._sorted.close()

    def result(self):
        buckets = self.call.params["num_buckets"]
        boundaries = np.zeros([1, buckets - 1], np.float32)
        with self._sorted:
            if not self.n:
                return boundaries
            ranks = [k * self.n // buckets for k in range(1, buckets)]
            seen, at = 0, 0
            for key, count in self._sorted.sorted():
                seen += count
                while at < len(ranks) and ranks[at] < seen:
                    boundaries[0, at] = decoded(self.call.dtype, key)
                    at += 1
                if at == len(ranks):
                    break
        return boundaries


@dataclass(frozen=True)
class VocabularyFile:
    """A vocabulary's result: its file (`path`, a local one, a term a line, as tft writes
    it), how many terms it holds (`size`) and the SHA-256 of its bytes (`sha256`, hex)."""

    path: str
    size: int
    sha256: str


class Ordered:
    """A vocabulary's terms, sorted in tft's order as they come, then written to its file."""

    def __init__(self, call, directory, held):
        self.call, self.path = call, os.path.join(directory, call.params["filename"])
        self._threshold = call.params["frequency_threshold"]
        self._sorted = sorted_runs.SortedRuns(order=TftOrder(), held=held)

    def add(self, key, count):
        if not self._threshold or count >= self._threshold:
            self._sorted.add((key, count))

    def close(self):
        self._sorted.close()

    def result(self) -> VocabularyFile:
        top_k = self.call.params["top_k"]
        written = vocabulary.Lines(self.path)
        error = None
        try:
            with self._sorted:
                for term, _ in itertools.islice(self._sorted.sorted(), top_k):
                    written.add(term + b"\n")
            if not written.lines:
                written.add(EMPTY_VOCABULARY["int" if self.call.dtype.is_integer else "string"] + b"\n")
        except BaseException as e:
            error = e
            raise
        finally:
            written.close(error)
        return VocabularyFile(self.path, written.lines, written.sha256.hexdigest())
