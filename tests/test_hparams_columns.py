"""HPARAMS' columns: TensorBoard reads the first experiment summary it finds for every run it shows and checks its
first five `differs` columns, so a task's runs share one experiment, rewritten by each run over all of them."""

from __future__ import annotations

from pathlib import Path

from lightning.pytorch.loggers import TensorBoardLogger
from tensorboard.backend.event_processing.plugin_event_multiplexer import EventMultiplexer
from tensorboard.plugins.hparams import plugin_data_pb2

from transformer_attention.training.hparams import log_hyperparameters


def config(num_heads: int = 4, pooling: str = "cls", epochs: int = 10) -> dict:
    return {
        "model": {"_target_": "x.Module", "d_model": 64, "num_heads": num_heads, "pooling": pooling},
        "data": {"name": "toy", "max_length": 64},
        "trainer": {"max_epochs": epochs},
        "seed": 42,
    }


def train(root: Path, name: str, cfg: dict, overrides: list[str], metrics=("val/acc_best", "test/acc")) -> Path:
    """What train.py logs for a run in `<root>/<name>`: its session in its event file, HPARAMS' columns shared."""
    run = root / name
    lg = TensorBoardLogger(run, name=None, version="", default_hp_metric=False)
    log_hyperparameters([lg], cfg, overrides, metrics=list(metrics), trial_id=run.name, shared=(run, root))
    lg.finalize("success")
    return run


def experiments(root: Path) -> dict[str, plugin_data_pb2.Experiment]:
    """Every experiment summary TensorBoard finds under `root`, by run, as its multiplexer reads them."""
    mux = EventMultiplexer()
    mux.AddRunsFromDirectory(str(root))
    mux.Reload()
    found = {}
    for run, tags in mux.PluginRunToTagToContent("hparams").items():
        if "_hparams_/experiment" in tags:
            found[run] = plugin_data_pb2.HParamsPluginData.FromString(tags["_hparams_/experiment"]).experiment
    return found


def checked(experiment: plugin_data_pb2.Experiment) -> list[str]:
    return [h.name for h in experiment.hparam_infos if h.differs]


def test_one_experiment_checks_what_differs_between_the_runs_under_the_root(tmp_path):
    root = tmp_path / "train"
    train(root, "runs/a", config(), [])  # the defaults
    (only,) = experiments(root).values()
    assert checked(only) == []  # alone and the defaults: nothing differs
    train(root, "runs/b", config(pooling="mean", epochs=3), ["model.pooling=mean", "trainer.max_epochs=3"])
    for heads in (1, 2):
        train(root, f"multiruns/s/{heads}", config(num_heads=heads), [f"model.num_heads={heads}"])
    found = experiments(root)
    assert list(found) == ["hparams"]  # one experiment for all the runs: TensorBoard cannot pick another
    experiment = found["hparams"]
    assert sorted(checked(experiment)) == ["model.num_heads", "model.pooling", "trainer.max_epochs"]
    names = [h.name for h in experiment.hparam_infos]
    assert names[:3] == checked(experiment) and {"data.name", "seed", "model.d_model"} <= set(names)
    assert [m.display_name for m in experiment.metric_infos] == ["test/acc", "val/acc_best"]  # test/acc leads
    assert [m.name.tag for m in experiment.metric_infos] == ["~test/acc", "val/acc_best"]
    assert len(list((root / "hparams").glob("events.out.tfevents.*"))) == 1  # replaced, not appended

    (root / "runs" / "b" / "hparams_columns.json").unlink()  # a run deleted (its record with it), then a new one
    train(root, "runs/c", config(num_heads=2), ["model.num_heads=2"])
    assert sorted(checked(experiments(root)["hparams"])) == ["model.num_heads"]


def test_a_run_alone_checks_what_it_changes(tmp_path):
    """A run with no root to share (a test's config, a folder outside outputs): its own event file holds the
    experiment, what its overrides change checked."""
    lg = TensorBoardLogger(tmp_path, name=None, version="", default_hp_metric=False)
    log_hyperparameters([lg], config(num_heads=8), ["model.num_heads=8"], metrics=["val/acc_best"])
    lg.finalize("success")
    (experiment,) = experiments(tmp_path).values()
    assert checked(experiment) == ["model.num_heads"]
    assert not (tmp_path / "hparams").exists() and not (tmp_path / "hparams_columns.json").exists()


def test_with_more_than_five_differing_the_models_settings_are_checked_before_the_datas(tmp_path):
    root = tmp_path / "train"
    other = config(num_heads=8, pooling="mean", epochs=3)
    other["data"] = {"name": "rotten_tomatoes", "max_length": 128, "path": "rt", "batch_size": 16}
    train(root, "runs/a", config(), [])
    train(root, "runs/b", other, [])  # 7 settings differ: TensorBoard ticks five
    ticked = checked(experiments(root)["hparams"])
    assert "model.num_heads" in ticked and "model.pooling" in ticked and "trainer.max_epochs" in ticked
    assert len(ticked) == 5 and len([k for k in ticked if k.startswith("data.")]) == 2  # of the four data keys
