"""`pretrain.without_extra_texts`: what `model.init_from=pretrain` does when the extra texts its recipe needs are not
there (none given, or a hub name that does not load offline): random embeddings, said in the log and recorded in
the run's config, or one line before any work."""

from __future__ import annotations

import pytest
import yaml
from conftest import run_dirs, run_entry

from transformer_attention.data.unlabelled import HubUnavailable, load_texts

VECTORS = ["model.init_from=pretrain", "pretrain.method=skipgram", "model.freeze_embedding_epochs=1"]


def test_an_unreachable_hub_name_is_hub_unavailable_and_named_as_given(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubUnavailable) as err:
        load_texts("someone/no_such_reviews:unsupervised")
    reason = str(err.value).split(";")[0]  # what the log line names
    assert "'someone/no_such_reviews:unsupervised'" in reason and "hub" in reason
    with pytest.raises(HubUnavailable):
        load_texts("someone/no_such_reviews")


def test_scratch_starts_from_random_embeddings_says_so_and_records_it(tiny_overrides, tmp_path):
    proc = run_entry(
        "train.py", *tiny_overrides, *VECTORS, "pretrain.without_extra_texts=scratch",
        "pretrain.extra_texts=[someone/no_such_reviews]", "callbacks.attention_maps=null", "test=false",
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert "'someone/no_such_reviews'" in out and "starts from random embeddings (model.init_from=null)" in out
    assert "pretraining in" not in out and "skip-gram" not in out
    (run,) = run_dirs(tmp_path / "outputs")
    assert not (tmp_path / "outputs" / "pretrain").exists()
    hparams = yaml.safe_load((run / "hparams.yaml").read_text())
    assert hparams["freeze_embedding_epochs"] == 0  # a random embedding is not held fixed


def test_error_stops_in_one_line_before_any_work(tiny_overrides):
    proc = run_entry("train.py", *tiny_overrides, *VECTORS, "pretrain.without_extra_texts=error", check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "model.init_from=pretrain needs extra texts, and pretrain.extra_texts is empty" in proc.stderr
    assert "pretrain.extra_texts=[imdb:unsupervised]" in proc.stderr
    assert "tokenizing" not in proc.stderr + proc.stdout


def test_a_bad_choice_is_refused_with_the_choices(tiny_overrides):
    proc = run_entry("train.py", *tiny_overrides, "pretrain.without_extra_texts=random", check=False)
    assert proc.returncode == 1
    assert "pretrain.without_extra_texts='random' must be one of pretrain, scratch, error" in proc.stderr
