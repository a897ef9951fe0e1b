"""Timing the contenders: each command's wall time and peak RSS per role, the contenders run in
turns, and each one's runs reduced to a row of medians (its results must agree)."""

import collections
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable

__all__ = ["Contender", "Run", "measure", "time_part"]

Run = tuple[float, dict[str, float], dict]  # seconds, {role: peak RSS MB}, result
Contender = tuple[str, Callable[[], Run]]


def _children(pid: int) -> list[int]:
    """All descendants of `pid`."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                pass
    found, frontier = [], [pid]
    while frontier:
        frontier = [child for child, parent in parents.items() if parent in frontier]
        found += frontier
    return found


def _role(pid: int, root: int) -> str:
    """The role of `pid`: main (the command itself), its task's type (a TF_CONFIG), or child."""
    if pid == root:
        return "main"
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            env = f.read().split(b"\0")
    except OSError:
        return "child"
    for item in env:
        if item.startswith(b"TF_CONFIG="):
            return json.loads(item[len(b"TF_CONFIG=") :])["task"]["type"]
    return "child"


def _peak_rss_kb(pid: int) -> int:
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return 0
    return 0


def measure(command: list[str], env: dict[str, str] | None = None) -> tuple[float, dict[str, float], str]:
    """Runs `command`; returns (seconds, {role: peak RSS MB}, stdout). Fails loudly."""
    started = time.monotonic()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peaks = collections.defaultdict(int)
    done = threading.Event()

    def sample():
        while not done.wait(0.05):
            for pid in [proc.pid] + _children(proc.pid):
                role = _role(pid, proc.pid)
                peaks[role] = max(peaks[role], _peak_rss_kb(pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    seconds = time.monotonic() - started
    done.set()
    sampler.join()
    if proc.returncode != 0:
        sys.exit("benchmark run failed (%s): %s\n%s" % (proc.returncode, " ".join(command), err.decode()[-3000:]))
    return seconds, {role: kb / 1000 for role, kb in peaks.items()}, out.decode()


def time_part(part: str, size: float, contenders: list[Contender], repeats: int) -> list[dict]:
    """Each contender `repeats` times, in turns, and a row each (`size`: the part's MB)."""
    runs = {name: [] for name, _ in contenders}
    for repeat in range(repeats):  # A B C A B C ...: a slow moment hits every contender alike
        for name, run in contenders:
            runs[name].append(run())
            print("  %-6s %-36s %7.2f s  (run %d)" % (part, name, runs[name][-1][0], repeat + 1), flush=True)
    return [_row(part, name, size, runs[name]) for name, _ in contenders]


def _row(part: str, name: str, size: float, runs: list[Run]) -> dict:
    """One contender's runs as a row: median and range of the wall time, the largest
    peak RSS per role, the median start-up and map phase, and the result, which must
    be the same in every run."""
    timing = ("startup", "map_seconds")
    results = [{k: v for k, v in result.items() if k not in timing} for _, _, result in runs]
    if any(r != results[0] for r in results):
        sys.exit("%s %s: runs disagree: %s" % (part, name, results))
    seconds = [s for s, _, _ in runs]
    rss = collections.defaultdict(float)
    for _, peaks, _ in runs:
        for role, mb in peaks.items():
            rss[role] = max(rss[role], mb)

    def median_of(key):
        values = [result[key] for _, _, result in runs if result.get(key)]
        return statistics.median(values) if values else None

    return dict(
        part=part,
        run=name,
        seconds=statistics.median(seconds),
        low=min(seconds),
        high=max(seconds),
        mb=size,
        rss=dict(rss),
        result=results[0],
        startup=median_of("startup"),
        steady=median_of("map_seconds"),
    )
