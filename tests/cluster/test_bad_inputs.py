"""--on_error=fail|skip on real clusters: inputs bad when listed, and inputs that change
between listing and reading (the servers start only after the coordinator has listed)."""

import json
import os
import sys

import pytest
from helpers.corpora import write_corpus
from helpers.oracles import oracle_words, read_result
from helpers.processes import ConfiguredCluster, LiveCoordinator, run_cli, task_env, unprivileged


def change_after_listing(root, paths):
    """Changes five listed files in five ways; returns {path: expected reason}."""
    deleted, truncated, grown, replaced, locked = paths[:5]
    os.unlink(deleted)
    with open(truncated, "r+b") as f:
        f.truncate(1)
    with open(grown, "ab") as f:
        f.write(b" more words")
    os.unlink(replaced)
    os.mkdir(replaced)
    os.chmod(locked, 0)
    return {
        deleted: "no such file or directory (it was there when the inputs were listed)",
        truncated: "changed since it was listed (%d bytes then, 1 now)",
        grown: "changed since it was listed (%d bytes then, %d now)",
        replaced: "is a directory",
        locked: "permission denied",
    }


@pytest.mark.parametrize("policy", ["skip", "fail"])
def test_inputs_that_change_between_listing_and_reading(tmp_path, processes, policy):
    root = str(tmp_path / "corpus")
    paths = [p for p in write_corpus(root, 30, seed=8) if os.path.getsize(p) > 1][:20]
    listing = tmp_path / "files.txt"
    listing.write_text("\n".join(paths) + "\n")
    sizes = {p: os.path.getsize(p) for p in paths}
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=1, num_workers=2)
    output = str(tmp_path / "result.json")
    job = LiveCoordinator(
        ["--input", "@%s" % listing, "--on_error", policy, "--files_per_step", "4", "--output", output],
        cluster.chief_env(),
        processes,
        tmp_path / "coordinator.log",
    )
    job.wait_for(r"wordcount over 20 files")  # listed; no server is up yet, so nothing was read
    reasons = change_after_listing(root, paths)
    reasons[paths[1]] %= sizes[paths[1]]
    reasons[paths[2]] %= (sizes[paths[2]], sizes[paths[2]] + len(b" more words"))
    for role, index in cluster.tasks:
        cluster.start(role, index, wrap=unprivileged)
    code, stdout, stderr = job.finish()
    # TensorFlow's own records of the failed steps (a remote traceback each) are not shown.
    assert "processing closure" not in stderr and "Traceback" not in stderr, stderr
    if policy == "fail":
        assert code == 1, stderr
        errors = [line for line in stderr.splitlines() if line.startswith("tf2_mapreduce: error: a map step failed: ")]
        assert len(errors) == 1
        assert any(errors[0].endswith("%s: %s" % (path, why)) for path, why in reasons.items()), errors[0]
    else:
        assert code == 0, stderr
        result = read_result(output)
        good = paths[5:]
        assert result["total_words"] == oracle_words(good)
        assert {r["path"] for r in result["per_file"]} == set(good)
        assert {r["path"]: r["reason"] for r in result["skipped"]} == reasons
        assert "5 input(s) skipped (--on_error=skip):" in stdout
        for path, why in reasons.items():
            assert "  %s: %s" % (path, why) in stdout
    assert cluster.exit_codes() == {task: 0 for task in cluster.tasks}
    os.chmod(paths[4], 0o644)


def test_skip_at_listing_lists_every_bad_input_and_counts_the_rest(tmp_path):
    root = tmp_path / "in"
    root.mkdir()
    good = [str(root / name) for name in ["plain.txt", "with spaces.txt", "naïve ünïcode ✓.txt"]]
    for n, path in enumerate(good):
        with open(path, "wb") as f:
            f.write(b"word " * (n + 3))
    (root / "locked.txt").write_bytes(b"secret words")
    os.chmod(root / "locked.txt", 0)
    os.mkfifo(root / "fifo")
    empty_list = tmp_path / "empty.txt"
    empty_list.write_text("\n")
    too_long = "/".join([str(root)] + ["d" * 250] * 20)
    listing = tmp_path / "files.txt"
    listing.write_text("\n".join([str(root / "missing.txt"), too_long]) + "\n")
    output = tmp_path / "result.json"
    command = unprivileged([sys.executable, "-m", "tf2_mapreduce.coordinator"])
    specs = [str(root), "@%s" % listing, "@%s" % empty_list]
    run = run_cli(["--on_error", "skip", "--output", str(output), *specs], env=task_env(), command=command)
    assert run.returncode == 0, run.stderr
    result = json.loads(output.read_text())
    assert result["total_words"] == oracle_words(good) == 3 + 4 + 5
    assert sorted(r["path"] for r in result["per_file"]) == sorted(good)
    assert {r["path"]: r["reason"] for r in result["skipped"]} == {
        str(root / "fifo"): "not a regular file (FIFOs, sockets and devices are not supported)",
        str(root / "locked.txt"): "permission denied",
        str(root / "missing.txt"): "no such file or directory",
        too_long: "file name too long",
        "@%s" % empty_list: "the list holds no paths",
    }
    assert "5 input(s) skipped (--on_error=skip):" in run.stdout
    os.chmod(root / "locked.txt", 0o644)
