"""The search space of a sweep: Hydra's sweep overrides (`choice`, `a,b,c`, `range`, `interval`, `tag(log, ...)`)
as Optuna distributions, and the overrides of one trial's job."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import IntervalSweep, Override, RangeSweep, Transformer
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

from .study import SweepError


def search_space(overrides: Sequence[str]) -> tuple[dict[str, BaseDistribution], list[str]]:
    """Hydra overrides as Optuna distributions and the fixed overrides every job gets as written; a later override
    of a key replaces an earlier one (the command line beats `hydra.sweeper.params`)."""
    space: dict[str, BaseDistribution] = {}
    fixed: dict[str, str] = {}
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        key = override.get_key_element()  # with its +, ++ or ~ prefix: the job gets it back as written
        space.pop(key, None)
        fixed.pop(key, None)
        if override.is_sweep_override():
            space[key] = distribution(override)
        else:
            fixed[key] = str(override.input_line)
    return space, list(fixed.values())


def distribution(override: Override) -> BaseDistribution:
    """An `interval` is continuous (tag `int`: whole numbers, `log`: log scale), an integer `range` is an
    IntDistribution with its step, anything else categorical."""
    sweep = override.value()
    if isinstance(sweep, IntervalSweep):
        key, log_scale, start, end = override.get_key_element(), "log" in sweep.tags, sweep.start, sweep.end
        assert start is not None and end is not None  # the parser sets both ends of an interval(a, b)
        if not start < end or (log_scale and start <= 0):
            low = "a positive start below its end (log scale)" if log_scale else "a start below its end"
            raise SweepError(
                f"{key}=interval({start}, {end}) is empty: an interval takes {low}, e.g. "
                f"{key}=interval({min(start, end)}, {max(start, end)})"
            )
        if "int" in sweep.tags:
            return IntDistribution(int(start), int(end), log=log_scale)
        return FloatDistribution(float(start), float(end), log=log_scale)
    if isinstance(sweep, RangeSweep) and not sweep.shuffle:
        start, stop, step = sweep.start, sweep.stop, sweep.step
        if isinstance(start, int) and isinstance(stop, int) and isinstance(step, int) and step > 0 and stop > start:
            last = start + (stop - 1 - start) // step * step  # Hydra's stop is exclusive
            return IntDistribution(start, last, step=step)
    # Transformer.encode leaves str, int, float and bool as they are and writes any other value as its text
    values = cast("list[str | int | float | bool]", list(override.sweep_iterator(transformer=Transformer.encode)))
    return CategoricalDistribution(values)


def trial_overrides(fixed: Sequence[str], params: dict[str, Any]) -> tuple[str, ...]:
    """The overrides of one trial's job: its values first (they lead the folder's name), then the fixed ones."""
    return (*(f"{key}={Transformer.str(value)}" for key, value in params.items()), *fixed)
