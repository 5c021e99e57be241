"""Checks on a composed config, run before any data is loaded or model built.

Each failure names the key, the bad value and the fix, and raises ConfigError.
"""

from __future__ import annotations

from omegaconf import DictConfig


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key and the fix."""


def validate_config(cfg: DictConfig) -> None:
    """Raise ConfigError on the first impossible value in `cfg`."""
    model = cfg.get("model")
    if model is not None and model.get("d_model") is not None and model.get("num_heads") is not None:
        d, h = model.d_model, model.num_heads
        if h <= 0 or d <= 0 or d % h != 0:
            raise ConfigError(
                f"model.d_model={d} is not divisible by model.num_heads={h}: pick model.num_heads among "
                f"the divisors of model.d_model (e.g. model.num_heads={_divisor_near(d, h)})"
            )


def _divisor_near(d: int, h: int) -> int:
    if d <= 0:
        return 1
    divisors = [k for k in range(1, d + 1) if d % k == 0]
    return min(divisors, key=lambda k: (abs(k - h), k))
