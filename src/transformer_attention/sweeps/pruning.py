"""The job side of an Optuna sweep: optuna-integration's pruning callback, on the job's trial found again from its
config (storage, study name, trial number = job number), so it works with any launcher; the trial is told PRUNED
here, where it happens, so the sweeper reports a pruned trial, not a failed job."""

from __future__ import annotations

import logging
from typing import Any

import optuna
from optuna.trial import TrialState
from optuna_integration.pytorch_lightning import PyTorchLightningPruningCallback

from ..errors import ConfigError

log = logging.getLogger(__name__)


def reattach(storage: str, study_name: str, number: int, pruner: optuna.pruners.BasePruner) -> optuna.trial.Trial:
    """The running trial `number` of a stored study, as the object an objective function gets."""
    backend = optuna.storages.RDBStorage(storage)
    study = optuna.load_study(
        study_name=study_name, storage=backend, pruner=pruner, sampler=optuna.samplers.RandomSampler()
    )  # the job never samples: the sweeper asked for the trial's values
    study_id = backend.get_study_id_from_name(study_name)
    return optuna.trial.Trial(study, backend.get_trial_id_from_study_id_trial_number(study_id, number))


class OptunaPruning(PyTorchLightningPruningCallback):
    """Report `monitor` to trial `trial` of `study_name` in `storage` each epoch; `pruner` decides."""

    def __init__(
        self,
        storage: str | None,
        study_name: str,
        trial: int,
        monitor: str = "val/acc",
        pruner: optuna.pruners.BasePruner | None = None,
    ) -> None:
        if not storage:
            raise ConfigError(
                "pruning needs a stored study: set hydra.sweeper.storage (e.g. sqlite:///study.db), "
                "or switch pruning off with callbacks.optuna_pruning=null"
            )
        self.trial = reattach(storage, study_name, int(trial), pruner or optuna.pruners.NopPruner())
        super().__init__(self.trial, monitor)

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        try:
            super().on_validation_end(trainer, pl_module)
        except optuna.TrialPruned as pruned:
            log.info("trial %d: %s (%s below what the pruner asks)", self.trial.number, pruned, self.monitor)
            self.trial.study.tell(self.trial, state=TrialState.PRUNED)
            raise
