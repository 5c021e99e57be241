"""The value predicates every settings check shares (the config check, the model's, the data's, predict's):
whole numbers and real numbers that are not booleans (`True` is an int in Python, never a size here).
Standard library only."""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any


def is_whole(value: Any, low: int | None = None) -> bool:
    """A whole number (not a bool), at least `low` when given."""
    return isinstance(value, Integral) and not isinstance(value, bool) and (low is None or value >= low)


def is_number(value: Any) -> bool:
    """A real number (not a bool)."""
    return isinstance(value, Real) and not isinstance(value, bool)


def is_finite(value: Any) -> bool:
    """Anything `float()` reads as a finite number (not a bool): what a sweep's job may return."""
    try:
        return not isinstance(value, bool) and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False
