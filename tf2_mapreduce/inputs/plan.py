"""Files -> pieces: each file cut at record boundaries into pieces of about `read_size`,
the unit a worker reads at once and the unit whose result is committed exactly once;
and the tf.data pipeline of splits, the pieces of one scheduled map step."""

import hashlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tf2_mapreduce.errors import InputError, cause_of
from tf2_mapreduce.inputs import formats
from tf2_mapreduce.inputs.files import Files, tf_error
from tf2_mapreduce.storage import retrying

__all__ = ["Piece", "Plan"]


@dataclass(frozen=True, slots=True)
class Piece:
    """Bytes [start, end) of file number `file`."""

    file: int
    start: int
    end: int

    @property
    def size(self):
        return self.end - self.start


class _Pieces(Sequence):
    """A plan's pieces as a sequence of `Piece`s, made on demand from its columns."""

    def __init__(self, files, starts, ends):
        self._files, self._starts, self._ends = files, starts, ends

    def __len__(self):
        return len(self._files)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        return Piece(int(self._files[i]), int(self._starts[i]), int(self._ends[i]))

    def __eq__(self, other):
        return isinstance(other, Sequence) and list(self) == list(other)


class Plan:
    """`files` (`Files`, or `InputFile`s) of the format of `records` (a `formats.Format`,
    or its name in `Job.records`) cut into pieces of about `read_size` bytes where the
    format says (`Format.cuts`): a text file just after a separator (ASCII whitespace for
    words, a newline for lines), so that every word (or line) lies in exactly one piece,
    the one in which it starts; a TFRecord file where a record starts as its checksums
    tell, each piece read as a stream of its records that must end exactly at the next
    cut, so a misleading cut fails the job rather than count a record twice or never. A
    compressed file (`formats.compression_of`) cannot be cut: it is one piece, read as a
    stream.

    Pieces are columns (`piece_files`, `starts`, `ends`, `sizes`: int64 arrays in piece
    order; `pieces` shows them as `Piece`s), so that a million files plan in a fraction
    of a second.

    Blocking: reads a few bytes (a record, for TFRecord files) at each cut of a large
    file, waiting through an outage of its storage (`storage.retrying`). A file that can no
    longer be read is an `InputError`, or with on_error="skip" is left out and listed in
    `skipped` as (path, reason).
    """

    def __init__(self, files, read_size, records="words", on_error="fail", compression="auto"):
        self.files = files = Files.of(files)
        self.on_error = on_error
        self.read_size = read_size
        self.format = formats.of_records(records)
        self.compressions = formats.compressions_of(files, compression)
        self._compressed = np.array([bool(c) for c in self.compressions], dtype=bool)
        self.skipped = []
        counts = np.ones(len(files), dtype=np.int64)  # pieces per file
        cut = {}  # file number -> its cuts, for the files cut in several pieces
        for number in np.flatnonzero((files.sizes > read_size) & ~self._compressed).tolist():
            f = files[number]
            try:
                # Through an outage of its storage: never a reason to leave the file out.
                cuts = retrying(lambda f=f: self.format.cuts(f.path, f.size, read_size), f.path)
            except (OSError, tf_error()) as e:
                error = InputError(f.path, "cannot be read to plan its pieces: " + cause_of(e))
                if on_error == "fail":
                    raise error from None
                self.skipped.append((error.path, error.reason))
                counts[number] = 0
                continue
            cut[number] = cuts
            counts[number] = len(cuts) - 1
        self._piece_file = np.repeat(np.arange(len(files), dtype=np.int64), counts)
        self.starts = np.zeros(len(self._piece_file), dtype=np.int64)
        self.ends = files.sizes[self._piece_file]
        first = np.cumsum(counts) - counts  # each file's first piece
        for number, cuts in cut.items():
            at = first[number]
            self.starts[at : at + len(cuts) - 1] = cuts[:-1]
            self.ends[at : at + len(cuts) - 1] = cuts[1:]
        self.sizes = self.ends - self.starts
        self.pieces = _Pieces(self._piece_file, self.starts, self.ends)
        self._whole = self.sizes == files.sizes[self._piece_file]

    @property
    def total_bytes(self) -> int:
        return int(self.sizes.sum())

    def whole(self, piece_id) -> bool:
        """Whether the piece is the whole of its file, not a byte range of it."""
        return bool(self._whole[piece_id])

    def kind(self, piece_id):
        """How a map step reads the piece: ("whole" | "range" | "stream", compression),
        compression as TF names it; one map step is traced per kind. A piece that its
        format streams (`Format.streamed`: a compressed file, any TFRecord file's, whole
        or a range of it) is a "stream"."""
        compression = self.compressions[self._piece_file[piece_id]]
        if self.format.streamed(compression):
            return "stream", compression
        return ("whole" if self.whole(piece_id) else "range"), ""

    def by_kind(self, ids) -> dict:
        """`ids` (piece ids) grouped by `kind`: {kind: int64 array of ids, in their order}."""
        ids = np.asarray(ids, dtype=np.int64)
        if not self.format.streamed("") and not self._compressed.any():
            whole = self._whole[ids]
            groups = {("whole", ""): ids[whole], ("range", ""): ids[~whole]}
            return {kind: chosen for kind, chosen in groups.items() if len(chosen)}
        groups = {}
        for i in ids.tolist():
            groups.setdefault(self.kind(i), []).append(i)
        return {kind: np.array(chosen, dtype=np.int64) for kind, chosen in groups.items()}

    def describe(self, piece_id) -> str:
        """A piece as users know it: its file, and the byte range if the file has several."""
        path = self.files.paths[self._piece_file[piece_id]]
        if self.whole(piece_id):
            return path
        return "%s (bytes %d-%d)" % (path, self.starts[piece_id], self.ends[piece_id])

    def file_of(self, piece_id):
        return self.files[self._piece_file[piece_id]]

    def piece_files(self) -> np.ndarray:
        """The file number of each piece, in piece order."""
        return self._piece_file

    def file_done(self, piece_done) -> np.ndarray:
        """Which files are done whole (every piece of them), as a bool array in file order."""
        total = np.bincount(self._piece_file, minlength=len(self.files))
        done = np.bincount(self._piece_file[piece_done], minlength=len(self.files))
        return (total > 0) & (done == total)

    def fingerprint(self) -> str:
        """A digest of the cuts: a checkpoint's state is per piece, so other cuts are another job."""
        columns = np.stack([self._piece_file, self.starts, self.ends]).astype("<i8")
        return hashlib.sha256(columns.tobytes()).hexdigest()

    def splits(self, ids, split_size, max_pieces):
        """A tf.data pipeline of splits: each element, the tensor arguments of one map
        step (piece ids, paths, starts, ends, file sizes), holds consecutive pieces of
        `ids` adding up to at most `split_size` bytes (a larger piece alone) and at most
        `max_pieces` pieces. Tensors, not Python values, so the step is traced once.
        Each split is made as it is read: a round over a million pieces starts at once,
        and makes the rest while the first steps run."""
        import tensorflow as tf

        ids = np.asarray(ids, dtype=np.int64)
        bounds = [0]
        count, size = 0, 0
        for piece_size in self.sizes[ids].tolist():
            if count and (size + piece_size > split_size or count >= max_pieces):
                bounds.append(bounds[-1] + count)
                count, size = 0, 0
            count += 1
            size += piece_size
        if count:
            bounds.append(bounds[-1] + count)
        paths = self.files.paths
        encoding, errors = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()  # as os.fsencode

        def elements():
            for a, b in zip(bounds, bounds[1:]):
                chosen = ids[a:b]
                files = self._piece_file[chosen]
                encoded = np.array([paths[f].encode(encoding, errors) for f in files.tolist()], dtype=object)
                yield chosen, encoded, self.starts[chosen], self.ends[chosen], self.files.sizes[files]

        vector = tf.TensorSpec([None], tf.int64)
        signature = (vector, tf.TensorSpec([None], tf.string), vector, vector, vector)
        return tf.data.Dataset.from_generator(elements, output_signature=signature)
