"""The plain-Python oracle: counts words with bytes.split(), one file at a time.

    python scripts/oracle_count.py /tmp/corpus

Takes files and directories (walked like the coordinator does: names starting with
'.' or '_' skipped) and prints the total, to check a cluster's answer against.
"""

import os
import sys


def files_under(path):
    if not os.path.isdir(path):
        yield path
        return
    for directory, subdirs, names in os.walk(path):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith((".", "_")))
        for name in sorted(names):
            if not name.startswith((".", "_")):
                yield os.path.join(directory, name)


def main(paths):
    total = files = 0
    for path in paths:
        for name in files_under(path):
            with open(name, "rb") as f:
                total += len(f.read().split())
            files += 1
    print("%d words in %d files" % (total, files))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: oracle_count.py PATH...")
    main(sys.argv[1:])
