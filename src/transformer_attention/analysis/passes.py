"""The model work an analysis does, counted before it runs: how many rows go forward and backward."""

from __future__ import annotations

from dataclasses import dataclass

BACKWARD_COST = 2  # a backward pass costs about two forward passes


@dataclass(frozen=True)
class Passes:
    """The model work a computation does, in rows: how many it runs forward, and how many backward."""

    forward: int = 0
    backward: int = 0

    def __add__(self, other: Passes) -> Passes:
        return Passes(forward=self.forward + other.forward, backward=self.backward + other.backward)

    @property
    def cost(self) -> int:
        """In forward passes of a row, a backward one counted as BACKWARD_COST."""
        return self.forward + BACKWARD_COST * self.backward
