"""Hydra finds sweepers only under `hydra_plugins`: this is the Optuna sweeper that resumes a stopped
study, its logic in `transformer_attention.sweeps` (imported when a sweep starts, so optuna stays an
optional dependency). Select it with `hparams_search=optuna`."""

from typing import Any

try:
    from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper
except ImportError:  # the `sweep` extra is not installed: nothing to offer
    OptunaSweeper = None

if OptunaSweeper is not None:

    class ResumableOptunaSweeper(OptunaSweeper):
        """hydra-optuna-sweeper's OptunaSweeper with a study that resumes where it stopped."""

        def __init__(self, **kwargs: Any) -> None:
            from transformer_attention.sweeps import ResumableOptunaSweeperImpl

            self.sweeper = ResumableOptunaSweeperImpl(**kwargs)
