"""What sorters that spill runs to disk share: the memory they hold together, past which
the one holding the most spills, and how many runs one merges at once."""

__all__ = ["RUN_BYTES", "FAN_IN", "Held"]

RUN_BYTES = 64 << 20  # bytes the sorters sharing a `Held` hold together by default; more spill
FAN_IN = 64  # runs merged at once (a file open and a buffer each); more are first merged into runs


class Held:
    """What the sorters sharing it (`members`, each with `held_bytes` and `spill()`) hold
    in memory together (`size`, bytes, which they keep) and may hold (`limit`, by default
    `RUN_BYTES`), and where they spill (`directory`; by default the system's temporary
    one)."""

    def __init__(self, limit: int | None = None, directory: str | None = None):
        self.limit, self.directory, self.size = limit or RUN_BYTES, directory, 0
        self.members = []

    def spill(self) -> None:
        """Spills the member holding the most."""
        max(self.members, key=lambda member: member.held_bytes).spill()
