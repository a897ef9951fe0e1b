"""The keys of a statistics table: what each key that the native op makes
(`native/example_features.cc`) means, decoded here only."""

import numpy as np

__all__ = ["StatKeys"]


class StatKeys:
    """The keys of a statistics table. b"e": the examples read. Else a record letter,
    the feature's name as a netstring (its length in decimal, ":", the name), a kind
    letter ("b" bytes, "f" float, "i" int64, "x" no list set) and:
    - record "n": the number of values in decimal; counted once per example holding
      the feature with that many values;
    - record "v": a value (bytes as they are; an int64 as 8 bytes big-endian with the
      sign bit flipped); counted once per occurrence. A float32 is counted by its
      bucket (`model.FLOAT_BITS`), 4 bytes big-endian, NaN as 0x7fc00000;
    - records of a float feature's exact figures (`builder.FloatSums`), a batch at a
      time: "s" then "+" or "-" and the biased exponent e as one byte, counting the sum
      of the mantissas of the values of that sign and exponent; "q" then the term (0, 1,
      2) and e, counting the sums of the terms of their squares; "<" and ">" then a
      batch's least or greatest value, 4 bytes big-endian."""

    reserved = (b"e",)
    examples_key = b"e"
    PAYLOAD_BYTES = {"f": 4, "i": 8}  # a number value's payload, by kind

    @staticmethod
    def numbers(kind, payloads):
        """The numbers of the payloads (end to end, bytes-like) of an "i" or "f" feature's
        values, as an array."""
        if kind == "f":
            return np.frombuffer(payloads, ">f4").astype(np.float32)
        return (np.frombuffer(payloads, ">u8").astype(np.uint64) ^ np.uint64(1 << 63)).view(np.int64)

    def split(self, key):
        """(record, name, kind, payload) of a key; (b"e", None, None, b"") for the examples."""
        if key == self.examples_key:
            return key, None, None, b""
        colon = key.index(b":")
        start = colon + 1
        end = start + int(key[1:colon])
        return key[:1], key[start:end].decode("utf-8", "surrogateescape"), key[end : end + 1].decode(), key[end + 1 :]
