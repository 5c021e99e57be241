"""The run's hyperparameters: the resolved config to each logger (`hparams.yaml`) and, for TensorBoard's HPARAMS
tab, the settings that shape a result (the same columns in every run, those that differ marked) and metrics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.types import RunMode
from lightning.pytorch.loggers import Logger, TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import OmegaConf
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData
from torch.utils.tensorboard.summary import hparams

from ..plotting.tags import tensorboard_tag
from .columns import MISSING, experiment_summary, record_columns
from .defaults import given_no_overrides
from .settings import default_config


def flatten_config(config: Mapping, prefix: str = "") -> dict[str, int | float | str]:
    """`{"model": {"d_model": 64}}` -> `{"model.d_model": 64}`; lists and bools as strings, None as "none"."""
    flat: dict[str, int | float | str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten_config(value, f"{name}."))
        else:
            plain = isinstance(value, (int, float, str)) and not isinstance(value, bool)
            flat[name] = MISSING if value is None else value if plain else str(value)
    return flat


RESULT_KEYS = (  # what shapes a result: the HPARAMS columns (model.* is all of the model's settings)
    "data.name",
    "data.path",
    "data.max_length",
    "data.batch_size",
    "data.vocab_size",
    "seed",
    "trainer.precision",
    "trainer.max_epochs",
    "trainer.accumulate_grad_batches",
)


def result_hparams(config: Mapping, overrides: Sequence[str] = (), columns: Sequence[str] = ()) -> dict[str, Any]:
    """The settings that shape a run's result, the same keys in every run (`columns`, `RESULT_KEYS`, `model.*` but
    `_target_`s; a group choice such as `data=imdb` from `overrides`), "none" where the run has none."""
    flat = flatten_config(config)
    given = dict(str(o).lstrip("+~").split("=", 1) for o in overrides if "=" in str(o))
    model = [k for k in flat if k.startswith("model.") and "._" not in f".{k}"]
    keys = dict.fromkeys([*columns, *RESULT_KEYS, *model])
    return {k: flat.get(k, given.get(k, MISSING)) for k in keys}


def differing_keys(settings: Mapping[str, Any], overrides: Sequence[str] = ()) -> list[str]:
    """The HPARAMS columns to check: in a multirun, the keys its sweep varies; in a single run, those its
    experiment and overrides change from the defaults (else the keys it overrides)."""
    if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
        return varied_keys(overrides)
    if given_no_overrides():  # the run is the defaults: nothing differs (and nothing to compose)
        return []
    defaults = default_settings(list(settings))
    if defaults is None:
        return [k for k in varied_keys(overrides) if k in settings]
    return [k for k, v in settings.items() if k in defaults and str(defaults[k]) != str(v)]


def default_settings(keys: Sequence[str]) -> dict[str, Any] | None:
    """`keys` as the Hydra app's config has them without overrides (None outside one), but those left `???`."""
    cfg = default_config()  # the same composition the console's tree compared the run against
    if cfg is None:  # outside a Hydra app, or one composed another way (a test's config): fall back
        return None
    out = {}
    for key in keys:
        value = OmegaConf.select(cfg, key, default=MISSING, throw_on_missing=False, throw_on_resolution_failure=False)
        if value != "???" and not OmegaConf.is_config(value):
            out[key] = next(iter(flatten_config({"v": value}).values()))
    return out


# HPARAMS' metric columns: test/acc first, then the run's own optimised metric, then these (no epoch, no lr)
# (few, so that they fit beside the checked settings at 1600 px; every metric is in TIME SERIES and metrics.csv)
CLASSIFIER_METRICS = ("test/acc", "test/f1", "val/acc", "val/loss")


@rank_zero_only
def log_hyperparameters(
    loggers: Sequence[Logger],
    config: Mapping,
    overrides: Sequence[str] = (),
    metrics: Sequence[str] = (),
    trial_id: str | None = None,
    shared: tuple[Path, Path] | None = None,
) -> None:
    """The resolved config to every logger; to TensorBoard, this run's HPARAMS session, named `trial_id`, in the
    logger's own event file (a live `tensorboard` follows only a run's newest) and, given `metrics`, HPARAMS'
    experiment: its columns (`result_hparams`, then `metrics`), those that differ checked. TensorBoard reads one
    experiment for every run it shows, so with `shared` (the run's folder, the folder all its task's runs lie
    under) it is written once, in `<root>/hparams`, over every run recorded there (`columns.py`)."""
    # test/acc leads (the optimised metric may be one of the others): beside the Trial ID and five checked
    # settings, HPARAMS' table shows its eighth column whole at 1600 px, not the ninth
    metrics = sorted(dict.fromkeys(metrics), key=lambda m: m != CLASSIFIER_METRICS[0])
    multirun = HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
    settings = result_hparams(config, overrides, varied_keys(overrides) if multirun else ())
    differ = differing_keys(settings, overrides)
    _, session_start, session_end = hparams(settings, {})
    if trial_id:
        stored = session_start.value[0].metadata.plugin_data
        data = HParamsPluginData.FromString(stored.content)
        data.session_start_info.group_name = trial_id
        stored.content = data.SerializeToString()
    experiment, tensorboard = None, any(isinstance(lg, TensorBoardLogger) for lg in loggers)
    if metrics and tensorboard and shared is None:  # no root to share: this run's columns, what it changes checked
        experiment = experiment_summary(settings, differ, metrics)
    elif metrics and tensorboard and shared is not None:
        record_columns(*shared, settings, differ, metrics)
    for lg in loggers:
        lg.log_hyperparams(dict(config))
        if isinstance(lg, TensorBoardLogger):
            for summary in (experiment, session_start, session_end):
                if summary is not None:
                    lg.experiment.file_writer.add_summary(summary)


@dataclass(frozen=True)
class RunRecord:
    """What a run's loggers record of it: its resolved config, its own overrides, its folder, tags and notes."""

    config: dict[str, Any]
    output_dir: str
    overrides: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    notes: str | None = None

    @classmethod
    def of(cls, config: Mapping[str, Any], own_overrides: bool = True) -> RunRecord:
        """The record of a Hydra run whose resolved config is `config` (its overrides read from Hydra)."""
        given = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() and own_overrides else []
        paths = config.get("paths") or {}
        return cls(
            config=dict(config),
            output_dir=str(paths.get("output_dir", ".")),
            overrides=given,
            tags=list(config.get("tags") or []),
            notes=config.get("notes"),
        )


@rank_zero_only
def log_run(loggers: Sequence[Logger], record: RunRecord, metrics: Sequence[str | None] = ()) -> None:
    """`log_hyperparameters` for a Hydra run, and its `tags` and `notes` as a TensorBoard text."""
    trial, shown = trial_id(record.output_dir, record.overrides), [m for m in metrics if m]
    paths, task = record.config.get("paths") or {}, record.config.get("task_name")
    root = Path(str(paths.get("log_dir", ""))) / str(task) if task and paths.get("log_dir") else None
    run = Path(record.output_dir)
    shared = (run, root) if root is not None and run.resolve().is_relative_to(root.resolve()) else None
    log_hyperparameters(loggers, record.config, record.overrides, metrics=shown, trial_id=trial, shared=shared)
    text = ", ".join(map(str, record.tags)) + (f"\n\n{record.notes}" if record.notes else "")
    for lg in loggers if text else []:
        if isinstance(lg, TensorBoardLogger):
            lg.experiment.add_text(tensorboard_tag("run/tags"), text)


def varied_keys(overrides: Sequence[str]) -> list[str]:
    """The keys a multirun's sweep varies (`<sweep>/multirun.yaml`'s sweep overrides, `hydra.sweeper.params`); in
    a single run, every key it overrides."""
    own = [str(o).lstrip("+~").split("=", 1)[0] for o in overrides]
    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return own
    hydra = HydraConfig.get()
    recorded = Path(hydra.sweep.dir) / "multirun.yaml"
    if not recorded.is_file():
        return own
    task = [str(o) for o in OmegaConf.load(recorded).hydra.overrides.task]
    swept = [o.get_key_element() for o in OverridesParser.create().parse_overrides(task) if o.is_sweep_override()]
    return [k.lstrip("+~") for k in swept] + list((hydra.sweeper.get("params") or {}).keys())


def trial_id(run_dir: str | Path, overrides: Sequence[str] = ()) -> str:
    """A run's name in the HPARAMS Trial ID column (its first 15 characters show): the folder's, or for a sweep's
    job what it tried, its number and sweep (`num_heads=8 · job 3 · 2026-12-01_...`)."""
    run = Path(run_dir)
    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return run.name
    varied = set(varied_keys(overrides))
    pairs = [str(o).lstrip("+~").split("=", 1) for o in overrides if "=" in str(o)]
    tried = ",".join(f"{key.rsplit('.', 1)[-1]}={value}" for key, value in pairs if key in varied)
    return f"{tried or run.name} \u00b7 job {HydraConfig.get().job.num} \u00b7 {run.parent.name}"
