"""The one module that touches a dependency's private API. Each use says why no public API serves
and what removes it; tests/test_public_api.py fails loudly when the dependency changes it.

Imported only by sweeps.py, when an Optuna sweep starts (optuna stays an optional dependency).
"""

from __future__ import annotations

from typing import Any

import optuna

# hydra-optuna-sweeper 1.3 keeps its sweeper in the private module `_impl`, and Hydra has no contract
# for resuming a sweep (facebookresearch/hydra#3328: job numbering, remaining trials), so a sweeper
# that resumes a study has to subclass it. Issue 15 replaces it with a Sweeper of this project on
# Optuna >= 4, through Hydra's public plugin interface.
from hydra_plugins.hydra_optuna_sweeper._impl import OptunaSweeperImpl


class OptunaSweeperBase(OptunaSweeperImpl):
    """hydra-optuna-sweeper's sweeper, with public names for the two private members resuming needs."""

    def study_directions(self) -> Any:
        """The optimisation directions of the sweep's config, as `optuna.create_study(directions=...)`
        takes them (the sweeper keeps this in its private `_get_directions`)."""
        return self._get_directions()

    def first_job_number(self, trials: list[optuna.trial.Trial]) -> int:
        """The job number of the first trial of a batch about to be launched: by default the sweeper's
        own running count, `job_idx`."""
        return self.job_idx

    def _configure_trials(self, trials: list[optuna.trial.Trial], *args: Any, **kwargs: Any) -> Any:
        # the sweeper's private step that turns a batch of trials into jobs, the only place it
        # numbers them: the hook above decides that number
        self.job_idx = self.first_job_number(trials)
        return super()._configure_trials(trials, *args, **kwargs)
