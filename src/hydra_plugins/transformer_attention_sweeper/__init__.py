"""This project's Optuna sweeper as a Hydra plugin (found only under `hydra_plugins`), `hparams_search=optuna`.
Hydra imports every plugin at start-up, so this one imports `transformer_attention.sweeps` (optuna) only when a
sweep starts."""

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


@dataclass
class OptunaSweeperConf:
    """`hydra.sweeper.*`: a misspelt key or a wrong type fails when Hydra composes the config."""

    _target_: str = "hydra_plugins.transformer_attention_sweeper.OptunaSweeper"
    _recursive_: bool = False  # the sampler and pruner stay configs: a resumed study reseeds its sampler
    storage: str | None = None  # an RDB URL (sqlite:///...): the study outlives the launch, jobs reach it
    study_name: str | None = None
    n_trials: int = 20  # the study's total: a resumed study runs only the missing trials
    n_jobs: int = 1  # trials launched at once (in parallel with hydra/launcher=joblib)
    direction: Any = "maximize"  # or a list of directions, one per value the task returns
    max_failure_rate: float = 0.0  # stop when more than this fraction of the trials failed
    sampler: Any = None  # an optuna sampler as `_target_` config; None: TPESampler()
    pruner: Any = None  # an optuna pruner as `_target_` config, used by the jobs; None: no pruning
    params: dict[str, Any] | None = None  # key: choice(...) | range(...) | interval(...) | a fixed value
    enqueue_trials: list[Any] = field(default_factory=list)  # [{key: value, ...}]: the first trials of a new study


ConfigStore.instance().store(
    group="hydra/sweeper", name="transformer_attention_optuna", node=OptunaSweeperConf, provider="transformer_attention"
)


class OptunaSweeper(Sweeper):
    """Hydra's entry to `transformer_attention.sweeps.sweeper.StudySweeper`."""

    def __init__(self, **settings: Any) -> None:
        self.settings = settings
        self.study_sweeper: Sweeper | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from transformer_attention.sweeps.sweeper import StudySweeper

        self.study_sweeper = StudySweeper(**self.settings)
        self.study_sweeper.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: list[str]) -> Any:
        assert self.study_sweeper is not None, "setup() first"
        return self.study_sweeper.sweep(arguments)
