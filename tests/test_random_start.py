"""`model.freeze_embedding_epochs` holds loaded word vectors fixed; a run that starts from random embeddings
(`model.init_from=null`) never holds them, says so in one line and records 0."""

from __future__ import annotations

import yaml
from conftest import run_dirs, run_entry

from transformer_attention.training.builders import random_embedding_trains


def test_only_a_random_start_is_unfrozen_in_the_settings_and_their_copies():
    random, record = {"init_from": None, "freeze_embedding_epochs": 2}, {"freeze_embedding_epochs": 2}
    random_embedding_trains(random, record)
    assert random["freeze_embedding_epochs"] == record["freeze_embedding_epochs"] == 0
    loaded = {"init_from": "vectors.npz", "freeze_embedding_epochs": 2}
    random_embedding_trains(loaded)
    assert loaded["freeze_embedding_epochs"] == 2  # word vectors: held fixed as asked


def test_a_random_start_trains_its_embedding_from_the_first_epoch(tiny_overrides, tmp_path):
    proc = run_entry(
        "train.py", *tiny_overrides, "model.init_from=null", "model.freeze_embedding_epochs=1",
        "callbacks.attention_maps=null", "test=false",
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    said = [line for line in out.splitlines() if "model.freeze_embedding_epochs=1" in line]
    assert len(said) == 1 and "starts from random embeddings (model.init_from=null)" in said[0]
    (run,) = run_dirs(tmp_path / "outputs")
    assert yaml.safe_load((run / "hparams.yaml").read_text())["freeze_embedding_epochs"] == 0  # what the model got
    assert yaml.safe_load((run / ".hydra" / "config.yaml").read_text())["model"]["freeze_embedding_epochs"] == 1
