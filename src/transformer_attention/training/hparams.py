"""The run's hyperparameters for the loggers: the resolved config to each logger (`hparams.yaml`) and, for
TensorBoard's HPARAMS tab, a session of the settings that shape a result (`result_hparams`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lightning.pytorch.loggers import Logger, TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_only
from torch.utils.tensorboard.summary import hparams


def flatten_config(config: Mapping, prefix: str = "") -> dict[str, int | float | str]:
    """`{"model": {"d_model": 64}}` -> `{"model.d_model": 64}`; lists, None, bools and the like as strings
    (TensorBoard would show a bool as 0 / 1)."""
    flat: dict[str, int | float | str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten_config(value, f"{name}."))
        else:
            flat[name] = value if isinstance(value, (int, float, str)) and not isinstance(value, bool) else str(value)
    return flat


RESULT_KEYS = (  # what shapes a result: the HPARAMS columns (model.* is all of the model's settings)
    "data.name",
    "data.max_length",
    "data.batch_size",
    "data.vocab_size",
    "seed",
    "trainer.precision",
    "trainer.max_epochs",
    "trainer.accumulate_grad_batches",
)


def result_hparams(config: Mapping, overrides: Sequence[str] = ()) -> dict[str, int | float | str]:
    """The flattened settings that shape a run's result (`model.*` but Hydra's `_target_` plumbing, the data's
    name, length, batch and vocabulary, seed, precision, epochs), the keys in `overrides` (`key=value`, as
    Hydra's `hydra.overrides.task`) first: in TensorBoard's HPARAMS tab, what a sweep varied leads."""
    flat = flatten_config(config)
    keep = [k for k in flat if (k.startswith("model.") and "._" not in f".{k}") or k in RESULT_KEYS]
    first: dict[str, int | float | str] = {}
    for override in overrides:
        key, _, value = str(override).lstrip("+~").partition("=")
        if key.startswith(("hydra.", "paths.")):
            continue
        first[key] = flat.get(key, value)  # a group choice (data=imdb) is not a flat key: its value as given
    return {**first, **{k: flat[k] for k in keep if k not in first}}


@rank_zero_only
def log_hyperparameters(loggers: Sequence[Logger], config: Mapping, overrides: Sequence[str] = ()) -> None:
    """Log the resolved run config to every logger (Lightning's `hparams.yaml`). TensorBoard also gets an
    HPARAMS session: the settings that shape the result (`result_hparams`, named as in Hydra overrides).

    Only the session is written, no experiment summary: TensorBoard then builds the HPARAMS table from all
    runs' sessions, with the settings whose values differ between runs (what a sweep varied) as the first
    columns and the runs' scalar series as the metric columns. (A run's own experiment summary would be
    taken for all runs, its columns sorted by name.) The session goes into the logger's own event file,
    through its SummaryWriter's public `file_writer`: a second event file in the run folder could sort after
    the logger's, and a live `tensorboard` follows only a run's newest file."""
    _, session_start, session_end = hparams(result_hparams(config, overrides), {})
    for lg in loggers:
        lg.log_hyperparams(dict(config))
        if isinstance(lg, TensorBoardLogger):
            for summary in (session_start, session_end):
                lg.experiment.file_writer.add_summary(summary)
