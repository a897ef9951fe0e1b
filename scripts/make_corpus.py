"""Writes a deterministic test corpus: many text files of Zipf-distributed words.

    python scripts/make_corpus.py --out_dir /tmp/corpus --num_files 300

Words are separated by all six ASCII whitespace bytes (mostly spaces and newlines)
and include non-ASCII UTF-8; a few files are empty. Same flags, same bytes.
"""

import os
import random

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("out_dir", None, "Directory to create the corpus in.", required=True)
flags.DEFINE_integer("num_files", 300, "Number of files.", lower_bound=1)
flags.DEFINE_integer("words_per_file", 2000, "Mean words per file (sizes vary 0-2x).", lower_bound=0)
flags.DEFINE_integer("vocabulary", 50000, "Distinct words to draw from.", lower_bound=1)
flags.DEFINE_integer("seed", 0, "Random seed.")

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "shi", "vo", "zé", "ñu", "ß", "ø", "на", "东"]
SEPARATORS = [b" "] * 40 + [b"\n"] * 8 + [b"  ", b"\t", b"\r\n", b"\x0b", b"\x0c", b" \r "]


def vocabulary(size, rng):
    words = []
    for i in range(size):
        syllables = [SYLLABLES[(i // len(SYLLABLES) ** k) % len(SYLLABLES)] for k in range(1 + i.bit_length() // 4)]
        words.append(("".join(syllables) + rng.choice(["", "", "", ",", ".", "!"])).encode("utf-8"))
    return words


def main(argv):
    del argv
    rng = random.Random(FLAGS.seed)
    words = vocabulary(FLAGS.vocabulary, rng)
    weights = [1.0 / (rank + 1) for rank in range(len(words))]  # Zipf, s = 1
    os.makedirs(FLAGS.out_dir, exist_ok=True)
    for n in range(FLAGS.num_files):
        count = 0 if n % 97 == 13 else rng.randint(0, 2 * FLAGS.words_per_file)
        chosen = rng.choices(words, weights, k=count)
        parts = []
        for word in chosen:
            parts.append(word)
            parts.append(rng.choice(SEPARATORS))
        with open(os.path.join(FLAGS.out_dir, "part-%05d.txt" % n), "wb") as f:
            f.write(rng.choice([b"", b" ", b"\n"]) + b"".join(parts))
    print("wrote %d files to %s" % (FLAGS.num_files, FLAGS.out_dir))


if __name__ == "__main__":
    app.run(main)
