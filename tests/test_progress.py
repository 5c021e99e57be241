"""Long work says where it is wherever the output goes: log lines at the start, at least every 30 s and at the end
where stderr is not a terminal (tokenizing, and epochs, validations and tests through `LineProgress`)."""

from __future__ import annotations

import logging
import re

import lightning as L
import numpy as np

from transformer_attention.callbacks.console import LineProgress
from transformer_attention.data import progress as progress_module
from transformer_attention.data import tokenizer as tokenizer_module
from transformer_attention.data.datamodule import ReviewDataModule
from transformer_attention.data.progress import LogProgress, Silent, progress
from transformer_attention.module import ClassifierModule


def test_log_progress_says_the_start_each_interval_and_the_end(monkeypatch, caplog):
    clock = iter([0.0, 10.0, 31.0, 45.0, 62.0, 70.0])  # made; then after each update; then closed
    monkeypatch.setattr(progress_module.time, "perf_counter", lambda: next(clock))
    with caplog.at_level(logging.INFO, logger=progress_module.__name__):
        with LogProgress(25_000, "tokenizing test", "text") as bar:
            for _ in range(4):
                bar.update(5_000)
    assert [r.getMessage() for r in caplog.records] == [
        "tokenizing test: 25,000 texts",
        "tokenizing test: 10,000 of 25,000 texts, 31 s",  # 30 s passed since the start line
        "tokenizing test: 20,000 of 25,000 texts, 62 s",  # and since that one: 45 s was too soon
        "tokenizing test: 20,000 texts in 70.0 s",
    ]


def test_progress_is_a_bar_in_a_terminal_lines_elsewhere_and_nothing_when_short(monkeypatch):
    monkeypatch.setattr(progress_module.sys.stderr, "isatty", lambda: True, raising=False)
    bar = progress(10, "x", "text")
    assert type(bar).__name__ == "tqdm"
    bar.close()
    monkeypatch.setattr(progress_module.sys.stderr, "isatty", lambda: False, raising=False)
    assert isinstance(progress(10, "x", "text"), LogProgress)
    assert isinstance(progress(10, "x", "text", show=False), Silent)


def test_tokenizing_many_texts_is_logged_where_stderr_is_no_terminal(monkeypatch, caplog):
    data = ReviewDataModule(name="toy", toy_size=200, max_length=16, vocab_size=100, min_frequency=1)
    data.setup("fit")
    monkeypatch.setattr(tokenizer_module, "PROGRESS_MIN_TEXTS", 50)
    monkeypatch.setattr(tokenizer_module, "ENCODE_CHUNK", 20)
    monkeypatch.setattr(progress_module, "EVERY_S", 0.0)
    texts = [f"review {i} is not good" for i in range(60)]
    with caplog.at_level(logging.INFO, logger=progress_module.__name__):
        ids = tokenizer_module.encode(data.tokenizer, texts, 16, desc="tokenizing test")
    assert len(ids) == 60 and all(isinstance(i, np.ndarray) for i in ids)
    said = [r.getMessage() for r in caplog.records]
    assert said[0] == "tokenizing test: 60 texts" and said[-1].startswith("tokenizing test: 60 texts in ")
    assert "tokenizing test: 20 of 60 texts, 0 s" in said  # every chunk, with no time between lines
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=progress_module.__name__):
        tokenizer_module.encode(data.tokenizer, texts[:49], 16, desc="tokenizing test")
    assert not caplog.records  # under PROGRESS_MIN_TEXTS: too short to follow


def test_line_progress_says_what_a_test_reads_and_where_long_steps_are(tmp_path, caplog):
    L.seed_everything(0)
    data = ReviewDataModule(name="toy", toy_size=300, max_length=16, batch_size=32, vocab_size=100, min_frequency=1)
    data.setup("fit")
    data.eval_batch_size = 8
    module = ClassifierModule(vocab_size=data.vocab_size, num_classes=2, d_model=16, num_heads=2, num_layers=1,
                              dim_feedforward=16)  # fmt: skip
    bar = LineProgress(every_s=0.0)  # a line at every batch: as a step that runs past every_s
    trainer = L.Trainer(default_root_dir=tmp_path, max_epochs=1, accelerator="cpu", logger=False, callbacks=[bar],
                        enable_checkpointing=False, enable_model_summary=False, num_sanity_val_steps=0)  # fmt: skip
    with caplog.at_level(logging.INFO, logger="transformer_attention.callbacks.console"):
        trainer.fit(module, datamodule=data)
        trainer.test(module, datamodule=data)
    said = [r.getMessage() for r in caplog.records]
    train, val, test = len(data.train_dataloader()), len(data.val_dataloader()), len(data.test_dataloader())
    texts = len(data.test_dataloader().dataset)
    assert f"epoch 1/1: 1 of {train} batches" in " ".join(said) and any(
        re.fullmatch(rf"epoch 1/1, validation: {val} of {val} batches, .+", s) for s in said
    )
    start = said.index(f"testing {texts:,} texts in {test} batches")
    assert [s.split(",")[0] for s in said[start + 1 : start + 1 + test]] == [
        f"test: {i} of {test} batches" for i in range(1, test + 1)
    ]


def test_a_limited_test_says_how_many_texts_it_tests(tmp_path, caplog):
    """`trainer.limit_test_batches=2` tests the first two batches: the line counts the texts in them (counted
    as the batches go by), not the split's."""
    L.seed_everything(0)
    data = ReviewDataModule(name="toy", toy_size=300, max_length=16, batch_size=32, vocab_size=100)
    data.setup("fit")
    data.eval_batch_size = 8
    module = ClassifierModule(vocab_size=data.vocab_size, num_classes=2, d_model=16, num_heads=2, num_layers=1)
    seen: list[int] = []

    class Count(L.Callback):
        def on_test_batch_end(self, trainer, pl_module, outputs, batch, *args) -> None:
            seen.append(len(batch["labels"]))

    bars = [LineProgress(every_s=1e9), Count()]
    trainer = L.Trainer(
        default_root_dir=tmp_path, accelerator="cpu", logger=False, limit_test_batches=2, callbacks=bars
    )
    with caplog.at_level(logging.INFO, logger="transformer_attention.callbacks.console"):
        trainer.test(module, datamodule=data)
    texts = len(data.test_dataloader().dataset)
    said = [r.getMessage() for r in caplog.records]
    assert texts > sum(seen) == 16
    assert f"testing {sum(seen)} of {texts} texts, 2 batches (trainer.limit_test_batches)" in said


def test_epochs_count_from_one_in_the_bar_the_lines_and_the_checkpoints(tmp_path, caplog):
    """One numbering: the terminal's bar (`Epoch 2/2`), the log lines (`epoch 2/2`) and the checkpoint written at
    that epoch's end (`epoch_002.ckpt`, holding Lightning's 0-based epoch 1) all count from 1."""
    import torch

    from transformer_attention.callbacks.console import TerminalProgress
    from transformer_attention.callbacks.epoch_checkpoint import EpochCheckpoint

    L.seed_everything(0)
    data = ReviewDataModule(name="toy", toy_size=200, max_length=16, batch_size=64, vocab_size=100)
    module = ClassifierModule(vocab_size=100, num_classes=2, d_model=16, num_heads=2, num_layers=1)
    for bar in (LineProgress(every_s=1e9), TerminalProgress()):
        folder, name = tmp_path / type(bar).__name__, "epoch_{epoch:03d}"  # as conf/callbacks/default.yaml has
        saved = EpochCheckpoint(dirpath=folder, filename=name, save_top_k=-1, auto_insert_metric_name=False)
        given = {"logger": False, "enable_model_summary": False, "num_sanity_val_steps": 0, "accelerator": "cpu"}
        trainer = L.Trainer(default_root_dir=tmp_path, max_epochs=2, callbacks=[bar, saved], **given)
        with caplog.at_level(logging.INFO, logger="transformer_attention.callbacks.console"):
            trainer.fit(module, datamodule=data)
    lines = [r.getMessage().split(",")[0] for r in caplog.records if r.getMessage().startswith("epoch ")]
    assert lines == ["epoch 1/2", "epoch 2/2"]
    assert bar.progress is not None and bar.train_progress_bar_id is not None
    assert bar.progress.tasks[bar.train_progress_bar_id].description.strip() == "Epoch 2/2"
    folder = tmp_path / "LineProgress"
    names = sorted(p.name for p in folder.glob("*.ckpt"))
    assert names == ["epoch_001.ckpt", "epoch_002.ckpt"]
    for name in names:
        stored = torch.load(folder / name, map_location="cpu", weights_only=False)["epoch"]
        assert stored + 1 == int(name[6:9])


def test_the_epoch_checkpoint_keeps_model_checkpoints_state_key(tmp_path):
    """A run resumed from a checkpoint that Lightning's ModelCheckpoint wrote finds its state (the best score)."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    from transformer_attention.callbacks.epoch_checkpoint import EpochCheckpoint

    given = {"dirpath": tmp_path, "monitor": "val/acc", "mode": "max", "filename": "epoch_{epoch:03d}"}
    assert EpochCheckpoint(**given).state_key == ModelCheckpoint(**given).state_key
