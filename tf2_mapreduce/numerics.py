"""Exact figures of numbers counted as keys: sums kept as integers per power of two, so that
a sum, mean and variance come out exact and the same in any order; the least and greatest."""

import math
from fractions import Fraction

__all__ = ["Moments", "Extremes"]


def _exact(counts: dict[int, int]) -> Fraction:
    """The sum of count * 2**power over {power: count}, exact."""
    if not counts:
        return Fraction(0)
    low = min(counts)
    return sum(count << (power - low) for power, count in counts.items()) * Fraction(2) ** low


class Moments:
    """The sum and the sum of squares of some numbers, added up exactly from integers times
    powers of two (`add_sum`, `add_square`, in any order): `total`, `squares` (Fractions)."""

    def __init__(self):
        self._sums: dict[int, int] = {}  # power of two -> the integers added at it
        self._squares: dict[int, int] = {}

    def add_sum(self, power: int, count: int) -> None:
        """Adds count * 2**power (count may be negative) to the sum."""
        self._sums[power] = self._sums.get(power, 0) + count

    def add_square(self, power: int, count: int) -> None:
        """Adds count * 2**power to the sum of squares."""
        self._squares[power] = self._squares.get(power, 0) + count

    @property
    def total(self) -> Fraction:
        return _exact(self._sums)

    @property
    def squares(self) -> Fraction:
        return _exact(self._squares)

    def mean_and_var(self, n: int) -> tuple[Fraction, Fraction]:
        """The mean and population variance of the `n` numbers summed, exact (0 and 0 of none)."""
        if not n:
            return Fraction(0), Fraction(0)
        mean = self.total / n
        return mean, self.squares / n - mean * mean


class Extremes:
    """The least and the greatest of numbers added one at a time (each batch's own, say),
    the same in any order: -0.0 comes before 0.0. `low` and `high` are None until one is."""

    def __init__(self):
        self.low = self.high = None
        self._low_key = self._high_key = None

    def add(self, value) -> None:
        key = (value, not math.copysign(1.0, value) < 0)
        if self._low_key is None or key < self._low_key:
            self._low_key, self.low = key, value
        if self._high_key is None or key > self._high_key:
            self._high_key, self.high = key, value
