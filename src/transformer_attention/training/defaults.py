"""Whether a run is its entry's defaults: what the console's tree and HPARAMS' checked columns compare it against.
Torch-free: the entry shell imports it."""

from __future__ import annotations

from hydra.core.hydra_config import HydraConfig


def given_no_overrides() -> bool:
    """Whether this is a Hydra run given no overrides: its config is then the one its entry composes with none
    (`settings.default_config`), so the defaults need no composing again (about 0.3 s of the default run)."""
    return HydraConfig.initialized() and not HydraConfig.get().overrides.task
