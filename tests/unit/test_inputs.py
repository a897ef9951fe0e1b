"""Input specs -> files: directories, globs, @lists, and a one-line error for each bad input."""

import os
import random
import shutil
import subprocess
import sys

import pytest
from helpers.corpora import touch

from tf2_mapreduce.errors import InputError
from tf2_mapreduce.inputs.files import Files, InputFile, Inputs
from tf2_mapreduce.inputs.listing import expand, first_files
from tf2_mapreduce.inputs.walk import split_hidden


def paths(found):
    return [f.path for f in found.files]


@pytest.fixture
def tree(tmp_path):
    root = str(tmp_path)
    for name in [
        "a.txt",
        "b.log",
        "sub/c.txt",
        "sub/deeper/d.txt",
        ".hidden",
        "_SUCCESS",
        ".git/config",
        "with space é.txt",
    ]:
        touch(os.path.join(root, name), name.encode())
    return root


def test_directory_is_walked_recursively_and_sorted_skipping_hidden(tree):
    found = expand([tree])
    # Top-down: a directory's files in name order, then its subdirectories.
    names = ["a.txt", "b.log", "with space é.txt", "sub/c.txt", "sub/deeper/d.txt"]
    assert paths(found) == [os.path.join(tree, n) for n in names]
    assert sorted(os.path.basename(p) for p in found.hidden) == [".git", ".hidden", "_SUCCESS"]
    assert [f.size for f in found.files] == [len(n.encode()) for n in names]


def test_hidden_file_named_explicitly_is_included(tree):
    assert paths(expand([os.path.join(tree, "_SUCCESS")])) == [os.path.join(tree, "_SUCCESS")]


def test_glob_and_several_specs_in_order(tree):
    found = expand([os.path.join(tree, "*.txt"), os.path.join(tree, "sub", "c.txt")])
    assert paths(found) == [
        os.path.join(tree, "a.txt"),
        os.path.join(tree, "with space é.txt"),
        os.path.join(tree, "sub", "c.txt"),
    ]


def test_glob_matching_a_directory_walks_it(tree):
    assert paths(expand([os.path.join(tree, "su?")])) == [
        os.path.join(tree, "sub/c.txt"),
        os.path.join(tree, "sub/deeper/d.txt"),
    ]


def test_a_file_reached_twice_is_kept_once(tree):
    found = expand([tree, os.path.join(tree, "a.txt"), os.path.join(tree, "sub", "..", "a.txt")])
    assert paths(found).count(os.path.join(tree, "a.txt")) == 1
    assert len(found.duplicates) == 2


def test_a_symbolic_link_to_a_listed_file_is_a_duplicate_and_a_hard_link_is_a_file(tree, tmp_path):
    a = os.path.join(tree, "a.txt")
    os.symlink(a, str(tmp_path / "soft.txt"))
    os.link(a, str(tmp_path / "hard.txt"))
    found = expand([a, str(tmp_path / "soft.txt"), str(tmp_path / "hard.txt")])
    assert paths(found) == [a, str(tmp_path / "hard.txt")]
    assert found.duplicates == [str(tmp_path / "soft.txt")]


def test_hard_links_of_one_file_are_files_and_links_to_any_of_them_duplicates(tree, tmp_path):
    a = os.path.join(tree, "a.txt")
    hard = [str(tmp_path / ("hard%d.txt" % k)) for k in range(3)]
    for link in hard:
        os.link(a, link)
    os.symlink(hard[1], str(tmp_path / "soft.txt"))
    found = expand([a, *hard, str(tmp_path / "soft.txt"), hard[2]])
    assert paths(found) == [a, *hard]
    assert found.duplicates == [str(tmp_path / "soft.txt"), hard[2]]


def test_at_list_relative_to_cwd_with_blank_lines(tree, monkeypatch):
    listing = touch(os.path.join(tree, "lists", "files.txt"), b"a.txt\n\n  sub/c.txt  \r\nsub/deeper\n")
    monkeypatch.chdir(tree)
    assert paths(expand(["@" + listing])) == ["a.txt", "sub/c.txt", "sub/deeper/d.txt"]


@pytest.mark.parametrize(
    "spec, message",
    [
        ("missing.txt", "{root}/missing.txt: no such file or directory"),
        ("*.nothing", "{root}/*.nothing: no path matched"),
        ("empty", "{root}/empty: directory holds no input files"),
        ("fifo", "{root}/fifo: not a regular file (FIFOs, sockets and devices are not supported)"),
        ("dangling", "{root}/dangling: broken symbolic link"),
        ("@{root}/list.txt", "@{root}/list.txt line 2: {root}/gone.txt: no such file or directory"),
        ("@{root}/empty.lst", "@{root}/empty.lst: the list holds no paths"),
        ("@{root}/empty", "@{root}/empty: is a directory, not a list of paths"),
        ("@{root}/nolist.txt", "@{root}/nolist.txt: no such file or directory"),
    ],
)
def test_bad_input_is_one_line_naming_path_and_cause(tmp_path, spec, message):
    root = str(tmp_path)
    touch(os.path.join(root, "ok.txt"))
    os.mkdir(os.path.join(root, "empty"))
    os.mkfifo(os.path.join(root, "fifo"))
    os.symlink(os.path.join(root, "nowhere"), os.path.join(root, "dangling"))
    touch(os.path.join(root, "list.txt"), ("%s/ok.txt\n%s/gone.txt\n" % (root, root)).encode())
    touch(os.path.join(root, "empty.lst"), b"\n  \n")
    spec = spec.format(root=root)
    if not spec.startswith("@"):
        spec = os.path.join(root, spec)
    with pytest.raises(InputError) as e:
        expand([spec])
    assert str(e.value) == message.format(root=root)
    assert "\n" not in str(e.value)


def error_of(call):
    try:
        call()
    except InputError as e:
        return str(e)
    return None


@pytest.mark.parametrize(
    "specs, on_error, said_first",
    [
        (["ok.txt", "missing.txt"], "fail", True),
        (["fifo", "ok.txt"], "fail", True),
        (["dangling"], "fail", True),
        (["ok.txt", "ok.txt"], "fail", False),
        (["missing.txt"], "skip", False),
        # Behind a directory, a pattern or a list, the error may be theirs: left to the listing.
        (["empty", "missing.txt"], "fail", False),
        (["*.nothing", "missing.txt"], "fail", False),
        (["@list.txt", "missing.txt"], "fail", False),
    ],
)
def test_the_first_files_error_is_the_listings_first(tmp_path, specs, on_error, said_first):
    root = str(tmp_path)
    touch(os.path.join(root, "ok.txt"))
    os.mkdir(os.path.join(root, "empty"))
    os.mkfifo(os.path.join(root, "fifo"))
    os.symlink(os.path.join(root, "nowhere"), os.path.join(root, "dangling"))
    touch(os.path.join(root, "list.txt"), ("%s/ok.txt\n" % root).encode())
    specs = ["@" + os.path.join(root, s[1:]) if s.startswith("@") else os.path.join(root, s) for s in specs]
    first = error_of(lambda: first_files(specs, on_error))
    assert (first is not None) == said_first
    if first is not None:
        assert first == error_of(lambda: expand(specs, on_error))


def test_no_input_at_all():
    with pytest.raises(InputError, match="no input given"):
        expand([])


def test_empty_files_are_inputs(tmp_path):
    empty = touch(str(tmp_path / "empty.txt"), b"")
    assert [(f.path, f.size) for f in expand([empty]).files] == [(empty, 0)]


def test_skip_records_every_bad_input_and_goes_on(tmp_path):
    root = str(tmp_path)
    good = [touch(os.path.join(root, "ok", name)) for name in ["a.txt", "b c.txt", "naïve ü.txt"]]
    os.mkfifo(os.path.join(root, "ok", "fifo"))
    os.mkdir(os.path.join(root, "empty"))
    listing = touch(os.path.join(root, "list.txt"), ("%s\n%s/missing.txt\n" % (good[0], root)).encode())
    specs = [
        os.path.join(root, "ok"),
        "@" + listing,
        os.path.join(root, "empty"),
        os.path.join(root, "*.nope"),
        "@" + os.path.join(root, "nolist"),
    ]
    found = expand(specs, on_error="skip")
    assert sorted(f.path for f in found.files) == sorted(good)
    assert found.skipped == [
        (os.path.join(root, "ok", "fifo"), "not a regular file (FIFOs, sockets and devices are not supported)"),
        (os.path.join(root, "missing.txt"), "no such file or directory"),
        (os.path.join(root, "empty"), "directory holds no input files"),
        (os.path.join(root, "*.nope"), "no path matched"),
        ("@" + os.path.join(root, "nolist"), "no such file or directory"),
    ]


def test_skip_with_nothing_readable_is_still_an_error(tmp_path):
    with pytest.raises(InputError, match="no readable input file \\(1 skipped, first .*missing: no such file"):
        expand([str(tmp_path / "missing")], on_error="skip")


def test_non_utf8_and_very_long_names(tmp_path):
    root = os.fsencode(str(tmp_path))
    odd = os.path.join(root, b"caf\xe9 \xff.txt")  # Latin-1 bytes: not valid UTF-8
    with open(odd, "wb") as f:
        f.write(b"x y")
    # A path longer than PATH_MAX (4096) cannot be opened by anyone: it is refused cleanly.
    fd = os.open(root, os.O_RDONLY)
    depth = 0
    try:
        while depth * 201 < 4200:
            os.mkdir(b"d" * 200, dir_fd=fd)
            next_fd = os.open(b"d" * 200, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd, depth = next_fd, depth + 1
        os.close(os.open(b"deep.txt", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    finally:
        os.close(fd)
    deep = os.path.join(str(tmp_path), *["d" * 200] * depth, "deep.txt")
    found = expand([str(tmp_path / "*.txt"), deep], on_error="skip")
    assert [os.fsencode(f.path) for f in found.files] == [odd]
    assert found.skipped == [(deep, "file name too long")]
    with pytest.raises(InputError, match="file name too long"):
        expand([deep])


def test_unreadable_file_is_refused(tmp_path):
    secret = touch(str(tmp_path / "secret.txt"), b"no peeking")
    os.chmod(secret, 0)
    code = (
        "from tf2_mapreduce.inputs.listing import expand\n"
        "from tf2_mapreduce.errors import InputError\n"
        "try:\n    expand([%r])\nexcept InputError as e:\n    print(e)\n" % secret
    )
    command = [sys.executable, "-c", code]
    if os.geteuid() == 0:
        # Root reads any file; without these two capabilities it obeys mode 000.
        if not shutil.which("setpriv"):
            pytest.skip("running as root and util-linux's setpriv is missing: cannot make a file unreadable")
        caps = "-dac_override,-dac_read_search"
        command = ["setpriv", "--bounding-set=" + caps, "--inh-caps=" + caps] + command
    out = subprocess.run(command, capture_output=True, timeout=120, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert out.stdout.decode().strip() == "%s: permission denied" % secret, out.stderr.decode()[-2000:]


def test_a_tree_deeper_than_pythons_recursion_limit_is_walked_in_order(tmp_path):
    depth = sys.getrecursionlimit() + 200
    directory, expected = str(tmp_path), []
    fd = os.open(directory, os.O_RDONLY)
    try:
        for _ in range(depth):  # by descriptor: the paths grow past what one call may take
            for name in ("b.txt", "a.txt"):
                os.close(os.open(name, os.O_WRONLY | os.O_CREAT, dir_fd=fd))
            os.mkdir("d", dir_fd=fd)
            next_fd = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = next_fd
    finally:
        os.close(fd)
    for level in range(depth):
        prefix = os.path.join(directory, *["d"] * level)
        expected += [os.path.join(prefix, "a.txt"), os.path.join(prefix, "b.txt")]
    try:
        found = expand([directory], on_error="skip")
    finally:
        subprocess.run(["rm", "-rf", os.path.join(directory, "d")], check=True)  # shutil.rmtree recurses
    listed = paths(found) + [path for path, _ in found.skipped]
    assert listed == expected
    assert all(reason == "file name too long" for _, reason in found.skipped)


def _oracle_files(top):
    """The real paths of the files under `top`, following links to directories, each
    directory once by its real path, hidden names left out: walked recursively by realpath,
    not by inode as the product does."""
    found, seen = set(), set()

    def walk(directory):
        if os.path.realpath(directory) in seen:
            return
        seen.add(os.path.realpath(directory))
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if name.startswith((".", "_")):
                continue
            if os.path.isdir(path):
                walk(path)
            elif os.path.isfile(path):
                found.add(os.path.realpath(path))

    walk(top)
    return found


@pytest.mark.parametrize("seed", range(4))
def test_links_to_files_and_directories_in_any_layout_list_each_file_once(tmp_path, seed):
    rng = random.Random(seed)
    root = tmp_path / "root"
    directories = [root]
    root.mkdir()
    for n in range(40):
        parent = rng.choice(directories)
        if rng.random() < 0.3:
            directories.append(parent / ("d%d" % n))
            directories[-1].mkdir()
        else:
            touch(str(parent / ("f%d.txt" % n)), b"%d" % n)
    # Files reached only through a link to their directory, from inside the tree.
    elsewhere = tmp_path / "elsewhere"
    touch(str(elsewhere / "e1.txt"))
    touch(str(elsewhere / "deeper" / "e2.txt"))
    os.symlink(elsewhere, rng.choice(directories) / "outside")
    files = [p for p in root.rglob("f*.txt")]
    for n in range(30):
        place = rng.choice(directories) / ("l%d" % n)
        kind = rng.random()
        if kind < 0.4:  # a hard link: a file of its own
            os.link(rng.choice(files), place)
        elif kind < 0.7:  # to a file, absolute or relative, maybe through ".."
            target = rng.choice(files)
            os.symlink(target if rng.random() < 0.5 else os.path.relpath(target, place.parent), place)
        else:  # to a directory: an ancestor (a loop), a sibling, the root
            target = rng.choice(directories)
            os.symlink(target if rng.random() < 0.5 else os.path.relpath(target, place.parent), place)
    found = expand([str(root), str(rng.choice(directories))])
    reals = [os.path.realpath(f.path) for f in found.files]
    assert len(reals) == len(set(reals))
    assert set(reals) == _oracle_files(str(root))
    assert {str(elsewhere / "e1.txt"), str(elsewhere / "deeper" / "e2.txt")} <= set(reals)


def test_hidden_names_are_split_off_sorted_names_by_bisection():
    rng = random.Random(7)
    alphabet = ".-_/`^~0aAé\x7f"
    for _ in range(300):
        names = sorted(
            {"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(0, 30))}
        )
        visible, hidden = split_hidden(names)
        assert visible == [n for n in names if not n.startswith((".", "_"))]
        assert sorted(hidden) == [n for n in names if n.startswith((".", "_"))]


def test_files_are_columns_that_read_as_input_files(tmp_path):
    listed = [InputFile(str(tmp_path / ("f%d" % n)), 10 * n, 1000 + n) for n in range(5)]
    files = Inputs(files=listed).files
    assert isinstance(files, Files) and Files.of(files) is files
    assert files.sizes.tolist() == [0, 10, 20, 30, 40] and files.mtimes.dtype.name == "int64"
    assert list(files) == listed and files == listed and files[3] == listed[3] and files[-1] == listed[-1]
    assert files[1:3] + [listed[0]] == listed[1:3] + [listed[0]]
    assert Inputs(files=listed).total_bytes == 100
    with pytest.raises(ValueError):
        Files(["a"], [1, 2], [0])


def test_a_large_directory_lists_as_its_files_one_by_one(tmp_path, monkeypatch):
    """Files statted in bulk, with hard links, links, a FIFO, a directory and an empty
    file among them, list as each file named on its own does."""
    names = []
    for n in range(120):
        names.append(touch(str(tmp_path / "d" / ("f%03d.txt" % n)), b"w " * n))
    os.link(names[5], tmp_path / "d" / "hard.txt")
    os.symlink(names[7], tmp_path / "d" / "link.txt")
    os.symlink(tmp_path / "nowhere", tmp_path / "d" / "broken.txt")
    os.mkfifo(tmp_path / "d" / "pipe.txt")
    (tmp_path / "d" / "sub").mkdir()
    touch(str(tmp_path / "d" / "sub" / "s.txt"))
    found = expand([str(tmp_path / "d")], on_error="skip")
    one_by_one = Inputs()
    expected_files = []
    for name in sorted(os.listdir(tmp_path / "d")):
        path = str(tmp_path / "d" / name)
        if name == "sub":
            continue
        try:
            one = expand([path])
        except InputError as e:
            one_by_one.skipped.append((e.path, e.reason))
            continue
        expected_files += list(one.files)
    expected_files.append(expand([str(tmp_path / "d" / "sub" / "s.txt")]).files[0])
    link = str(tmp_path / "d" / "link.txt")
    assert found.duplicates == [link]
    assert list(found.files) == [f for f in expected_files if f.path != link]
    assert found.skipped == one_by_one.skipped
    assert [reason for _, reason in found.skipped] == [
        "broken symbolic link",
        "not a regular file (FIFOs, sockets and devices are not supported)",
    ]


def test_an_at_list_statted_in_bulk_keeps_its_line_numbers(tmp_path):
    good = [touch(str(tmp_path / ("g%d.txt" % n))) for n in range(4)]
    lines = [good[0], str(tmp_path / "missing.txt"), good[1], str(tmp_path / "g*.txt"), "file://" + good[2], good[3]]
    listed = tmp_path / "list.txt"
    listed.write_text("\n".join(lines) + "\n")
    found = expand(["@%s" % listed], on_error="skip")
    assert paths(found) == good  # the glob brings g2 and g3; then both are duplicates
    assert found.duplicates == [good[0], good[1], "file://" + good[2], good[3]]
    assert found.skipped == [(str(tmp_path / "missing.txt"), "no such file or directory")]
    with pytest.raises(InputError) as e:
        expand(["@%s" % listed])
    assert str(e.value) == "@%s line 2: %s: no such file or directory" % (listed, tmp_path / "missing.txt")
