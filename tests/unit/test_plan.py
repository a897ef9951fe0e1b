"""Planning: files cut into pieces at record boundaries, and the splits of a map step."""

import os
import random

import pytest
from helpers.corpora import touch

from tf2_mapreduce.errors import InputError
from tf2_mapreduce.inputs import formats
from tf2_mapreduce.inputs.files import Files, InputFile
from tf2_mapreduce.inputs.listing import expand
from tf2_mapreduce.inputs.plan import Piece, Plan


def test_splits_pack_chosen_pieces_by_bytes_and_count(tmp_path):
    files = [InputFile(touch(str(tmp_path / ("f%d" % i)), b"x" * 10), 10, 0) for i in range(6)]
    plan = Plan(files, 10)
    assert plan.pieces == [Piece(i, 0, 10) for i in range(6)]
    steps = [[tuple(column.numpy().tolist()) for column in split] for split in plan.splits([0, 1, 2, 4, 5], 25, 4)]
    paths = [os.fsencode(f.path) for f in files]
    assert steps == [
        [(0, 1), (paths[0], paths[1]), (0, 0), (10, 10), (10, 10)],
        [(2, 4), (paths[2], paths[4]), (0, 0), (10, 10), (10, 10)],
        [(5,), (paths[5],), (0,), (10,), (10,)],
    ]
    assert [len(s[0]) for s in [list(x) for x in plan.splits(list(range(6)), 1000, 4)]] == [4, 2]


@pytest.mark.parametrize("records", ["words", "lines"])
def test_plan_cuts_at_record_starts_for_any_piece_size(tmp_path, records):
    # The boundary rule: every word (line) lies in exactly one piece, the one where it starts.
    rng = random.Random(9)
    path = str(tmp_path / "f.txt")
    for _ in range(150):
        data = bytes(rng.choice(b"ab \t\n\r\x0b\x0c\xa0") for _ in range(rng.randint(0, 400)))
        with open(path, "wb") as f:
            f.write(data)
        files = expand([path]).files
        read_size = rng.choice([1, 2, 3, 5, 8, 13, 64, 1000])
        plan = Plan(files, read_size, records)
        pieces = plan.pieces
        assert not plan.skipped
        assert [p.start for p in pieces][:1] == [0] and pieces[-1].end == len(data)
        assert all(a.end == b.start and a.size > 0 for a, b in zip(pieces, pieces[1:]))
        parts = [data[p.start : p.end] for p in pieces]
        if records == "words":
            assert [w for part in parts for w in part.split()] == data.split(), (data, read_size)
        else:
            assert [line for part in parts for line in part.split(b"\n")[:-1]] == data.split(b"\n")[:-1], (
                data,
                read_size,
            )
            assert all(part.endswith(b"\n") for part in parts[:-1])


def test_plan_of_a_file_gone_before_planning(tmp_path):
    path = touch(str(tmp_path / "big.txt"), b"word " * 100)
    files = expand([path]).files
    os.unlink(path)
    with pytest.raises(InputError, match="cannot be read to plan its pieces: no such file or directory"):
        Plan(files, 10)
    plan = Plan(files, 10, on_error="skip")
    assert plan.pieces == [] and plan.total_bytes == 0
    assert plan.skipped == [(path, "cannot be read to plan its pieces: no such file or directory")]


def test_a_plan_names_its_pieces_and_the_files_done(tmp_path):
    big = touch(str(tmp_path / "big.txt"), b"word " * 10)
    small = touch(str(tmp_path / "small.txt.gz"), b"not cut: compressed")
    files = expand([big, small]).files
    plan = Plan(files, 20, "words")
    assert [(p.file, p.start, p.end) for p in plan.pieces] == [(0, 0, 20), (0, 20, 40), (0, 40, 50), (1, 0, 19)]
    assert [plan.kind(i) for i in range(4)] == [("range", "")] * 3 + [("stream", "GZIP")]
    assert plan.describe(1) == "%s (bytes 20-40)" % big and plan.describe(3) == small
    assert plan.file_done([True, False, True, True]).tolist() == [False, True]
    assert plan.file_done([True, True, True, False]).tolist() == [True, False]
    assert plan.fingerprint() != Plan(files, 25, "words").fingerprint()


def test_a_plan_of_many_files_is_the_plans_of_each_file_joined(tmp_path):
    """Pieces as columns: small files, files cut in several pieces, compressed ones and
    one gone before planning (skipped), in any order, plan as each file planned alone."""
    rng = random.Random(3)
    files = []
    for n in range(60):
        name = str(tmp_path / ("f%02d%s" % (n, rng.choice([".txt", ".txt.gz", ".log", ""]))))
        files.append(touch(name, b"ab cd\n" * rng.choice([0, 1, 3, 20, 70])))
    found = expand(files).files
    os.unlink(files[17])
    plan = Plan(found, 32, "words", on_error="skip")
    expected, skipped = [], []
    for number, f in enumerate(found):
        alone = Plan([f], 32, "words", on_error="skip")
        expected += [(number, p.start, p.end) for p in alone.pieces]
        skipped += alone.skipped
    assert [(p.file, p.start, p.end) for p in plan.pieces] == expected
    assert plan.skipped == skipped and len(skipped) == (found[17].size > 32)
    assert plan.sizes.tolist() == [end - start for _, start, end in expected]
    ids = rng.sample(range(len(plan.pieces)), len(plan.pieces) // 2)
    by_kind = {}
    for i in ids:
        by_kind.setdefault(plan.kind(i), []).append(i)
    assert {kind: chosen.tolist() for kind, chosen in plan.by_kind(ids).items()} == by_kind
    assert len(by_kind) == 3  # whole, range, and stream for the gzip files


def test_formats_and_compressions_by_name_go_by_each_paths_suffixes():
    names = [
        "a.txt", "A.TXT", "x.tfrecord", "x.tfrecords.gz", "x.TFR.ZZ", "y.txt.gzip", "z.zlib", "noext",
        "dir.d/file", "dir.txt/file", "/d/.gz", "/d/.txt", "a.b.c.txt.gz", "t.tfrecord.bz2", ".", "x.", "x.gz.txt",
    ]  # fmt: skip
    files = Files(names * 2, [0] * len(names) * 2, [0] * len(names) * 2)
    for compression in formats.COMPRESSIONS:
        assert (
            formats.compressions_of(files, compression) == [formats.compression_of(n, compression) for n in names] * 2
        )
    assert formats._named(files)[0] == [formats.format_of(n) for n in names] * 2


def test_the_first_file_with_a_problem_is_named_whatever_its_problem():
    files = Files(["a.txt.gz", "b.tfrecord", "c.txt"], [1, 1, 1], [0, 0, 0])
    with pytest.raises(InputError) as e:
        formats.check(files, formats.LINES, native_missing="not built")
    assert e.value.path == "a.txt.gz" and "needs tf2_mapreduce's native ops" in e.value.reason
    with pytest.raises(InputError) as e:
        formats.check(files[1:], formats.LINES, native_missing="not built")
    assert e.value.path == "b.tfrecord" and "a tfrecord file by its name" in e.value.reason
