"""The plain-Python oracle of vocabularies: per feature of tf.train.Example records, a Counter of its values.

    python scripts/oracle_vocab.py --features query,tags,user_id /tmp/examples

Reads TFRecord files itself (GZIP, ZLIB or uncompressed, told apart by their first
bytes; the CRC of each record's length is checked, not that of its data), parses each
record with tf.train.Example.FromString, and prints a JSON summary: per feature the
examples, how many miss it, its values, distinct values, and the most frequent in
tf.Transform's order. Bytes values count as bytes, int64 values as their decimal
string (b"-5"); a float feature is an error. An example misses a feature when the key
is absent or its list has no values, as either way it gives no value ("empty" counts
the second kind). Terms print as UTF-8 with other bytes as \\xNN escapes.
"""

import collections
import json
import struct
import zlib

import oracle_count
from absl import app, flags

from tf2_mapreduce import quiet

tf = quiet.import_tensorflow()  # without the lines every CPU-only import prints

FLAGS = flags.FLAGS
flags.DEFINE_list("features", None, "Features to count, comma-separated.", required=True)
flags.DEFINE_integer("top", 10, "Most frequent terms to print per feature.", lower_bound=0)


def crc32c_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = crc >> 1 ^ (0x82F63B78 if crc & 1 else 0)
        table.append(crc)
    return table


CRC32C = crc32c_table()


def masked_crc(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc = CRC32C[(crc ^ byte) & 0xFF] ^ crc >> 8
    crc ^= 0xFFFFFFFF
    return ((crc >> 15 | crc << 17) + 0xA282EAD8) & 0xFFFFFFFF


def inflate(chunks, wbits, path):
    stream = zlib.decompressobj(wbits)
    for chunk in chunks:
        yield stream.decompress(chunk)
    if not stream.eof or stream.unused_data:
        raise ValueError("%s: a truncated stream, or data after its end" % path)


def frames(chunks, path):
    buffer, at = b"", 0
    for chunk in chunks:
        buffer, at = buffer[at:] + chunk, 0
        while len(buffer) - at >= 12:
            if struct.unpack_from("<I", buffer, at + 8)[0] != masked_crc(buffer[at : at + 8]):
                raise ValueError("%s: a record's length fails its CRC (not a TFRecord file?)" % path)
            end = at + 12 + struct.unpack_from("<Q", buffer, at)[0]
            if end + 4 > len(buffer):
                break
            yield buffer[at + 12 : end]
            at = end + 4
    if at != len(buffer):
        raise ValueError("%s: the last record is cut short" % path)


def records(path):
    """The records of one TFRecord file, whatever its compression."""
    with open(path, "rb") as f:
        head = f.read(12)
        f.seek(0)
        chunks = iter(lambda: f.read(1 << 20), b"")
        if len(head) == 12 and struct.unpack("<I", head[8:])[0] == masked_crc(head[:8]):
            pass
        elif head[:2] == b"\x1f\x8b":
            chunks = inflate(chunks, 31, path)
        elif len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0:
            chunks = inflate(chunks, 15, path)
        elif head:
            raise ValueError("%s: neither a TFRecord file nor a GZIP or ZLIB stream" % path)
        yield from frames(chunks, path)


def vocab_counts(paths, features):
    """{feature: {"counts": Counter of values, "examples", "missing", "empty", "values",
    "kinds": the Feature kinds seen}} over the records of `paths`."""
    result = {
        name: {"counts": collections.Counter(), "examples": 0, "missing": 0, "empty": 0, "values": 0, "kinds": set()}
        for name in features
    }
    for path in paths:
        for record in records(path):
            present = tf.train.Example.FromString(record).features.feature
            for name, r in result.items():
                r["examples"] += 1
                if name not in present:  # looked up first: indexing a missing key would add it
                    r["missing"] += 1
                    continue
                feature = present[name]
                kind = feature.WhichOneof("kind")
                if kind == "float_list":
                    raise ValueError("%s: %r is a float feature, which has no vocabulary" % (path, name))
                if kind == "bytes_list":
                    values = feature.bytes_list.value
                elif kind == "int64_list":
                    values = [b"%d" % v for v in feature.int64_list.value]
                else:
                    values = []  # a Feature with no list at all
                if kind:
                    r["kinds"].add(kind)
                if not values:
                    r["missing"] += 1
                    r["empty"] += 1
                r["counts"].update(values)
                r["values"] += len(values)
    for r in result.values():
        r["kinds"] = sorted(r["kinds"])
    return result


def ordered(counter):
    """(term, count) pairs in tf.Transform's vocabulary order: decreasing count, then
    reverse lexicographic order of the term bytes, e.g. [(b"a", 5), (b"c", 3), (b"b", 3)]."""
    return sorted(counter.items(), key=lambda item: (item[1], item[0]), reverse=True)


def main(argv):
    if len(argv) < 2:
        raise app.UsageError("usage: oracle_vocab.py --features NAME,... PATH...")
    paths = [name for path in argv[1:] for name in oracle_count.files_under(path)]
    counts = vocab_counts(paths, FLAGS.features)
    summary = {"files": len(paths), "features": {}}
    for name, r in counts.items():
        top = ordered(r["counts"])[: FLAGS.top]
        summary["features"][name] = {
            "examples": r["examples"],
            "missing": r["missing"],
            "empty": r["empty"],
            "values": r["values"],
            "distinct": len(r["counts"]),
            "kinds": r["kinds"],
            "top": [[term.decode("utf-8", "backslashreplace"), count] for term, count in top],
        }
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    app.run(main)
