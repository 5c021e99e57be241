"""A checkpoint knows its data: train.py records the data set, path, columns and length it trained on, evaluate.py
tests on them with no data keys, predict.py cuts texts at that length, and an override that changes what is
measured (another data set, another length) is said in one line. Checkpoints that record none keep working."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import ROOT
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf, open_dict

from transformer_attention.errors import ConfigError
from transformer_attention.inference import predict, trained_length
from transformer_attention.tasks import evaluate as evaluate_task
from transformer_attention.tasks import predict as predict_task
from transformer_attention.tasks import train as train_task
from transformer_attention.training.checkpoint import load_module
from transformer_attention.training.data_record import differences, recorded, settings_from
from transformer_attention.training.metrics import load_metrics

TINY_MODEL = ["model.d_model=16", "model.num_heads=2", "model.num_layers=1", "model.dim_feedforward=32"]
LENGTH = 12  # the training length: shorter than most texts below, so a cut is seen
POSITIVE = ["a fine warm film", "great fun and moving", "a lovely clever story", "wonderful acting, a good plot"]
NEGATIVE = ["a dull and silly film", "poor writing and bad acting", "boring and flat", "a weak tired story"]


def write_reviews(folder: Path, sizes: dict[str, int]) -> Path:
    """Rotten-Tomatoes-shaped parquet files (`text`, `label`) of three phrases each, one file a split."""
    folder.mkdir(parents=True)
    for split, n in sizes.items():
        pools = [(i % 2, (NEGATIVE, POSITIVE)[i % 2]) for i in range(n)]
        rows = [
            {"text": " ".join(pool[(i + j) % 4] for j in range(3)), "label": label}
            for i, (label, pool) in enumerate(pools)
        ]
        pd.DataFrame(rows).to_parquet(folder / f"{split}.parquet")
    return folder


def run(task: str, folder: Path, *overrides: str):
    """`python <task>.py overrides...` in this process: its config composed as Hydra composes it, in `folder`."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(task, overrides=list(overrides), return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(folder)
        cfg.hydra.job.name, cfg.hydra.job.num = task, 0
    HydraConfig.instance().set_config(cfg)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        return {"train": train_task, "evaluate": evaluate_task, "predict": predict_task}[task].main(cfg)
    finally:
        GlobalHydra.instance().clear()
        HydraConfig.instance().cfg = None  # type: ignore[assignment]  # no Hydra run for the tests after this one


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path, dict[str, float]]:
    """A tiny model trained on local Rotten-Tomatoes-shaped files (not the toy set), cut at LENGTH tokens: its
    best checkpoint, its data folder and its test metrics."""
    tmp = tmp_path_factory.mktemp("trained")
    data = write_reviews(tmp / "reviews", {"train": 96, "validation": 32, "test": 48})
    run_dir = tmp / "run"
    overrides = [*TINY_MODEL, "data=rotten_tomatoes", f"data.path={data}", f"data.max_length={LENGTH}"]
    overrides += ["trainer.max_epochs=1", "trainer.enable_progress_bar=false", "callbacks.attention_maps=null"]
    overrides += ["callbacks.model_analysis=null", f"paths.log_dir={tmp}"]
    run("train", run_dir, *overrides)
    metrics = load_metrics(run_dir)
    (ckpt,) = (run_dir / "checkpoints").glob("epoch_*.ckpt")
    return ckpt, data, metrics


def test_the_checkpoint_records_the_data_it_was_trained_on(trained):
    ckpt, data, _ = trained
    record = torch.load(ckpt, weights_only=True)["data"]
    assert record["name"] == "cornell-movie-review-data/rotten_tomatoes" and record["path"] == str(data)
    assert (record["text_column"], record["label_column"], record["max_length"]) == ("text", "label", LENGTH)
    assert "cache_dir" not in record and "_target_" not in record  # the machine's, not the model's
    assert load_module(ckpt).data_settings == record


def test_evaluate_with_no_data_keys_tests_on_the_models_own_data_and_length(trained, tmp_path, caplog):
    ckpt, _, train_metrics = trained
    with caplog.at_level(logging.WARNING):
        metrics = run("evaluate", tmp_path / "eval", f"ckpt_path={ckpt}", f"paths.log_dir={tmp_path}")
    assert metrics["test/acc"] == pytest.approx(train_metrics["test/acc"])  # its own 48 texts, not the toy set
    assert metrics["test/loss"] == pytest.approx(train_metrics["test/loss"], abs=1e-6)  # cut at the same length
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "data" in r.getMessage()]
    logged = OmegaConf.load(tmp_path / "eval" / "hparams.yaml").data  # HPARAMS: the data tested on
    assert (logged.name, logged.max_length) == ("cornell-movie-review-data/rotten_tomatoes", LENGTH)


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        (["data.max_length=8"], [f"data.max_length=8 (trained: {LENGTH})"]),
        (["data=toy"], ["data.name=toy (trained: cornell-movie-review-data/rotten_tomatoes)", "data.path=None"]),
    ],
)
def test_an_override_that_changes_what_is_measured_is_said_in_one_line(trained, tmp_path, caplog, overrides, said):
    ckpt, _, _ = trained
    with caplog.at_level(logging.WARNING):
        run("evaluate", tmp_path / "eval", f"ckpt_path={ckpt}", f"paths.log_dir={tmp_path}", *overrides)
    lines = [r.getMessage() for r in caplog.records if "was trained on" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0] and all(s in lines[0] for s in said), lines
    assert f"data.max_length={LENGTH}" not in lines[0] or "max_length=8" in overrides[0]


def test_an_override_the_checkpoint_agrees_with_says_nothing_and_a_length_past_the_model_is_refused(
    trained, tmp_path, caplog
):
    ckpt, data, _ = trained
    args = [f"ckpt_path={ckpt}", f"paths.log_dir={tmp_path}"]
    with caplog.at_level(logging.WARNING):  # the data set named again (a path relative to here): the same data
        run("evaluate", tmp_path / "same", *args, "data=rotten_tomatoes", f"data.path={os.path.relpath(data)}")
    assert not [r for r in caplog.records if "was trained on" in r.getMessage()]
    with pytest.raises(ConfigError, match=r"data.max_length=600 is longer than the longest input this model"):
        run("evaluate", tmp_path / "long", *args, "data.max_length=600")
    assert not (tmp_path / "long" / "metrics.json").exists()


def test_predict_cuts_texts_at_the_length_the_model_was_trained_with(trained):
    ckpt, _, _ = trained
    module = load_module(ckpt)
    long = " ".join(POSITIVE * 3)
    (pred,) = predict(module, [long])
    assert trained_length(module) == LENGTH and len(pred.tokens) == LENGTH < pred.text_tokens


def test_predict_py_says_in_one_line_a_length_other_than_the_trained_one(trained, tmp_path, caplog):
    ckpt, _, _ = trained
    text = f"text={' '.join(NEGATIVE)}"
    with caplog.at_level(logging.WARNING):
        (own,) = run("predict", tmp_path / "own", f"ckpt_path={ckpt}", text, f"paths.log_dir={tmp_path}")
        (cut,) = run(
            "predict", tmp_path / "cut", f"ckpt_path={ckpt}", text, "max_length=6", f"paths.log_dir={tmp_path}"
        )
    assert (len(own.tokens), len(cut.tokens)) == (LENGTH, 6)
    (line,) = [r.getMessage() for r in caplog.records if "was trained with" in r.getMessage()]
    assert line.startswith(f"max_length=6: texts cut at 6 tokens, not at the {LENGTH} ")


def test_a_checkpoint_that_records_no_data_keeps_working_and_says_so(trained, tmp_path, caplog):
    ckpt, _, _ = trained
    old = torch.load(ckpt, weights_only=True)
    del old["data"]
    torch.save(old, tmp_path / "old.ckpt")
    with caplog.at_level(logging.WARNING):
        old_args = [f"ckpt_path={tmp_path / 'old.ckpt'}", f"paths.log_dir={tmp_path}"]
        metrics = run("evaluate", tmp_path / "eval", *old_args, "data.toy_size=400")
    (line,) = [r.getMessage() for r in caplog.records if "records no data settings" in r.getMessage()]
    assert "testing on data toy" in line and "test/acc" in metrics  # as before: the config's data
    assert trained_length(load_module(tmp_path / "old.ckpt")) == LENGTH  # the tokenizer's cut


def test_the_record_and_the_command_line_make_the_data_settings(tmp_path):
    record = recorded({"_target_": "transformer_attention.data.ReviewDataModule", "name": "local", "path": "x"})
    assert record["path"] == str(Path("x").absolute()) and record["max_length"] == 128  # the class's default
    imdb = {**record, "name": "stanfordnlp/imdb", "path": None, "max_length": 256, "cache_dir": "/c"}
    assert settings_from(record, imdb, explicit=set(), group=False) == {**record, "cache_dir": "/c"}
    other = settings_from(record, imdb, explicit=set(), group=True)  # another data set, at the trained length
    assert other["name"] == "stanfordnlp/imdb" and other["max_length"] == 128
    assert differences(record, other) == [
        "data.name=stanfordnlp/imdb (trained: local)",
        f"data.path=None (trained: {record['path']})",
    ]
    same = settings_from(record, {**record, "path": "x", "max_length": 256}, explicit={"path"}, group=True)
    assert same["max_length"] == 128 and differences(record, same) == []  # the same files, named relative
