"""Masked-language-model pretraining: the masking, the corpus (no evaluated text, ever), a loss that falls,
and fine-tuning that starts from exactly the pretrained weights."""

from __future__ import annotations

import csv
import logging
from pathlib import Path

import lightning as L
import pytest
import torch
from conftest import TINY, TINY_PRETRAINING, run_dirs, run_entry, run_warm

from transformer_attention.data.datamodule import ReviewDataModule
from transformer_attention.data.tokenizer import CLS_ID, FIRST_WORD_ID, MASK_ID, PAD_ID
from transformer_attention.data.unlabelled import PretrainingData, normalized, windows
from transformer_attention.errors import CheckpointError, ConfigError
from transformer_attention.model import EncoderConfig
from transformer_attention.module import ClassifierModule
from transformer_attention.pretraining import METHOD_NAMES, METHODS, PretrainConfig, mlm
from transformer_attention.pretraining.mlm import IGNORE, MaskedLMModule, mask_tokens
from transformer_attention.pretraining.weights import PretrainedEncoder

SIZES = {"d_model": 16, "num_heads": 2, "num_layers": 2, "dim_feedforward": 32, "max_len": 64}


def padded_batch(B: int = 64, T: int = 40, vocab: int = 500, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, T + 1, (B,), generator=g)
    mask = torch.arange(T)[None, :] < lengths[:, None]  # (B, T)
    ids = torch.randint(FIRST_WORD_ID, vocab, (B, T), generator=g)
    ids[:, 0] = CLS_ID
    return ids.masked_fill(~mask, PAD_ID), mask


def test_masking_picks_15_percent_of_real_words_never_padding_or_cls():
    ids, mask = padded_batch(B=256)
    inputs, targets = mask_tokens(ids, mask, vocab_size=500, generator=torch.Generator().manual_seed(1))
    picked = targets != IGNORE
    words = mask & (ids >= FIRST_WORD_ID)
    assert not (picked & ~mask).any(), "a padding position was picked"
    assert not picked[:, 0].any(), "[CLS] was picked"
    assert torch.equal(targets[picked], ids[picked])  # the target is the original word
    rate = picked.sum() / words.sum()
    assert 0.13 < rate < 0.17, rate
    # 80% [MASK], 10% a random word, 10% kept
    masked = (inputs[picked] == MASK_ID).float().mean()
    kept = (inputs[picked] == ids[picked]).float().mean()
    assert 0.76 < masked < 0.84 and 0.07 < kept < 0.14, (masked, kept)
    assert torch.equal(inputs[~picked], ids[~picked])  # nothing else changes, padding included
    assert (inputs[picked] >= FIRST_WORD_ID).logical_or(inputs[picked] == MASK_ID).all()  # no [PAD]/[CLS] drawn


def test_masking_is_reproducible_with_a_generator_and_scores_one_word_at_least():
    ids, mask = padded_batch()
    a = mask_tokens(ids, mask, 500, generator=torch.Generator().manual_seed(3))
    b = mask_tokens(ids, mask, 500, generator=torch.Generator().manual_seed(3))
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    short = torch.tensor([[CLS_ID, 7, PAD_ID]])
    _, targets = mask_tokens(short, short != PAD_ID, 500, mask_prob=1e-6)
    assert targets.tolist() == [[IGNORE, 7, IGNORE]]


def test_windows_read_a_long_text_whole_each_starting_with_cls():
    row = torch.arange(FIRST_WORD_ID, FIRST_WORD_ID + 20).numpy()
    row[0] = CLS_ID
    pieces = windows([row], max_length=8)
    assert all(p[0] == CLS_ID and len(p) <= 8 for p in pieces)
    assert [t for p in pieces for t in p[1:]] == row[1:].tolist()


def write_csv(path: Path, rows: list[tuple[str, int]]) -> Path:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows(rows)
    return path


@pytest.fixture
def corpus(tmp_path: Path) -> tuple[PretrainingData, ReviewDataModule, Path]:
    """The toy set plus an extra source whose train split repeats a toy validation text (other case and
    spacing) and whose test split holds a sentence that must never be read."""
    data = ReviewDataModule(name="toy", toy_size=300, max_length=32, vocab_size=300, min_frequency=1)
    raw = data.load()
    leaked = "  " + raw["validation"]["text"][0].upper() + " "
    extra = tmp_path / "extra"
    extra.mkdir()
    write_csv(extra / "train.csv", [("an unlabelled review of a film", 0), (leaked, 1), ("another plain review", 0)])
    write_csv(extra / "test.csv", [("zyzzyva never read this", 0)])
    return PretrainingData(data, extra_texts=[str(extra)], max_length=16, batch_size=16, holdout=0.1), data, extra


def test_corpus_holds_train_and_extra_texts_never_an_evaluated_one(corpus, caplog):
    pre, data, _ = corpus
    with caplog.at_level(logging.WARNING):
        texts = pre.corpus()
    raw = data.load()
    used = {normalized(t) for t in texts["train"] + texts["validation"]}
    evaluated = {normalized(t) for s in ("validation", "test") for t in raw[s]["text"]}
    assert not used & evaluated
    assert "an unlabelled review of a film" in used and "another plain review" in used
    assert not any("zyzzyva" in t for t in used)  # the extra source's test split is not read
    assert len(used) == len({normalized(t) for t in raw["train"]["text"]}) + 2
    assert "dropped 1 of 3" in caplog.text
    pre.setup()
    assert pre.tokenizer.token_to_id("[MASK]") == MASK_ID
    assert pre.tokenizer.token_to_id("zyzzyva") is None


def test_pretraining_lowers_the_held_out_loss_and_scores_no_padding(corpus, monkeypatch, tmp_path):
    pre, _, _ = corpus
    pre.setup()
    scored_padding = []

    def spy(ids, attention_mask, *args, **kwargs):
        inputs, targets = mask_tokens(ids, attention_mask, *args, **kwargs)
        scored_padding.append(bool(((targets != IGNORE) & ~attention_mask).any()))
        return inputs, targets

    monkeypatch.setattr(mlm, "mask_tokens", spy)
    L.seed_everything(0)
    module = MaskedLMModule(vocab_size=pre.vocab_size, tokenizer=pre.tokenizer.to_str(), dropout=0.0, **SIZES)
    trainer = L.Trainer(
        max_epochs=8,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        inference_mode=False,  # validate() before fit: metric states must stay ordinary tensors
    )
    before = trainer.validate(module, datamodule=pre, verbose=False)[0]["val/mlm_loss"]
    trainer.fit(module, datamodule=pre)
    after = trainer.validate(module, datamodule=pre, verbose=False)[0]["val/mlm_loss"]
    assert after < before - 0.3, (before, after)  # 5.5 (about ln of the vocabulary) -> 4.9 in 8 short epochs
    assert scored_padding and not any(scored_padding)
    # fine-tuning starts from exactly these weights
    path = tmp_path / "mlm.ckpt"
    trainer.save_checkpoint(path)
    loaded = PretrainedEncoder.load(path)
    assert loaded.tokenizer == pre.tokenizer.to_str()
    loaded.check_fits({**SIZES, "norm_first": False, "activation": "relu", "positional": "sinusoidal"})
    classifier = ClassifierModule(vocab_size=pre.vocab_size, num_classes=2, dropout=0.3, **SIZES)
    head_before = classifier.net.head.weight.clone()
    copied = loaded.copy_into(classifier.net)
    assert "embedding.weight" in copied and any(n.startswith("encoder.layers.1.") for n in copied)
    pretrained_net = module.net.state_dict()
    for name, value in classifier.net.named_parameters():
        if name.startswith("head."):
            continue
        assert torch.equal(value, pretrained_net[name]), name
    assert torch.equal(classifier.net.head.weight, head_before)  # the head is the classifier's own


def test_a_different_size_is_a_one_line_error_naming_the_setting():
    encoder = PretrainedEncoder(EncoderConfig(**SIZES), tokenizer="{}", weights={}, source="x.ckpt")
    settings = {**SIZES, "norm_first": False, "activation": "relu", "positional": "sinusoidal"}
    encoder.check_fits(settings)
    with pytest.raises(ConfigError, match=r"d_model=16 but the config says model.d_model=32: set model.d_model=16"):
        encoder.check_fits({**settings, "d_model": 32})
    with pytest.raises(CheckpointError, match="not a pretrained encoder"):
        PretrainedEncoder.from_checkpoint({"hyper_parameters": {"d_model": 16}, "state_dict": {}}, "x.ckpt")


RECIPE = [o for o in TINY if not o.startswith(("model.num_layers", "trainer."))] + [
    "model.num_layers=2",
    "pretrain.batch_size=32",
    "pretrain.max_length=32",
    *TINY_PRETRAINING,  # one pretraining epoch ...
    "pretrain.trainer.precision=32-true",  # ... in fp32
]
# the same pretraining keys in both: pretrain.py runs only the pretraining, train.py fine-tunes after it too
PRETRAIN_PY = RECIPE
TRAIN_PY = [*RECIPE, *[o for o in TINY if o.startswith("trainer.")]]


@pytest.mark.slow
def test_pretrain_entry_then_train_from_it_and_from_the_cache(tmp_path: Path):
    """pretrain.py writes a checkpoint train.py starts from; train.py model.init_from=pretrain pretrains once,
    then reuses the cached encoder; a size that differs from the checkpoint's fails in one line."""
    log_dir = f"paths.log_dir={tmp_path / 'outputs'}"
    proc = run_warm("pretrain.py", *PRETRAIN_PY, log_dir)
    (run,) = run_dirs(tmp_path / "outputs", "pretrain")
    (ckpt,) = (run / "checkpoints").glob("mlm_*.ckpt")
    assert list(run.glob("events.out.tfevents.*"))
    assert (run / "config_tree.log").is_file()
    assert f"model.init_from={ckpt}" in proc.stdout
    trained = run_warm("train.py", *TRAIN_PY, log_dir, f"model.init_from={ckpt}", "trainer.limit_train_batches=2")
    assert "pretrained tensors copied" in trained.stdout + trained.stderr
    init_from = f"model.init_from={ckpt}"
    bad = run_warm("train.py", *TRAIN_PY, log_dir, init_from, "model.dim_feedforward=64", check=False)
    assert bad.returncode != 0
    assert "dim_feedforward=32 but the config says model.dim_feedforward=64" in bad.stderr
    assert "Traceback" not in bad.stderr
    # the same settings as pretrain.py ran: the cache already has this encoder, nothing pretrains again
    again = run_warm("train.py", *TRAIN_PY, log_dir, "model.init_from=pretrain", "trainer.limit_train_batches=2")
    assert "pretrained before on the same texts and settings" in again.stdout + again.stderr
    assert len(run_dirs(tmp_path / "outputs", "pretrain")) == 1


@pytest.mark.slow
def test_pretrain_takes_the_trainer_logger_and_callbacks_overrides_train_takes(tmp_path: Path):
    """pretrain.py's groups are train.py's `pretrain.*` ones: `logger@pretrain.logger=csv` writes metrics.csv (and no
    TensorBoard events), `pretrain.trainer.precision=bf16-mixed` trains in bf16 autocast,
    `pretrain.callbacks.lr_monitor=null` logs no learning rate."""
    overrides = [
        "logger@pretrain.logger=csv",
        "pretrain.trainer.precision=bf16-mixed",
        "pretrain.callbacks.lr_monitor=null",
    ]
    proc = run_warm("pretrain.py", *PRETRAIN_PY, *overrides, f"paths.log_dir={tmp_path / 'outputs'}")
    (run,) = run_dirs(tmp_path / "outputs", "pretrain")
    (metrics,) = run.glob("csv/version_*/metrics.csv")
    with metrics.open() as f:
        columns = next(csv.reader(f))
    assert "val/mlm_loss" in columns and "train/mlm_loss_epoch" in columns
    assert not any(c.startswith("lr-") for c in columns)
    assert not list(run.rglob("events.out.tfevents.*"))
    assert "Using bfloat16 Automatic Mixed Precision" in proc.stdout + proc.stderr
    assert "precision=auto" not in proc.stdout + proc.stderr  # asked for, not timed


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("pretrain.mask_prob=1.5", "pretrain.mask_prob=1.5 must be a number in (0, 1)"),
        ("pretrain.trainer.precision=fp8", "pretrain.trainer.precision='fp8' must be one of auto"),
        ("model.init_from=missing.ckpt", "model.init_from='missing.ckpt' is not a file"),
    ],
)
def test_bad_pretraining_settings_fail_in_one_line_before_any_data_is_read(tiny_overrides, override, message):
    proc = run_entry("train.py", *tiny_overrides, override, check=False)
    assert proc.returncode != 0
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert "tokenizing" not in proc.stderr + proc.stdout


def test_extra_texts_need_no_label_column_and_a_missing_path_is_named(tmp_path: Path):
    from transformer_attention.data.unlabelled import load_texts
    from transformer_attention.errors import DataError

    source = tmp_path / "reviews.csv"
    source.write_text("review\n10\na plain unlabelled review\n \n")
    assert load_texts(str(source), text_column="review") == ["10", "a plain unlabelled review"]
    with pytest.raises(DataError, match="pretrain.text_column='text' is not a column"):
        load_texts(str(source))
    with pytest.raises(DataError, match=r"'\./nowhere/imdb' does not exist"):
        load_texts("./nowhere/imdb")


def test_the_methods_table_is_what_the_config_check_allows_and_each_names_its_result():
    assert tuple(METHODS) == METHOD_NAMES  # the torch-free names the CLI checks pretrain.method against
    assert {m.suffix for m in METHODS.values()} == {".ckpt", ".npz"} and all(m.what for m in METHODS.values())
    with pytest.raises(ConfigError, match=r"pretrain\.method='skipgrams' is not a pretraining method: did you mean"):
        PretrainConfig(method="skipgrams")


def test_the_recipe_is_checked_when_built_and_the_encoder_follows_the_model():
    model = {"d_model": 32, "num_heads": 4, "num_layers": 1, "dim_feedforward": 64, "max_len": 64, "dropout": 0.3}
    settings = PretrainConfig.from_values({"max_length": 128, "dropout": 0.0}, model=model)
    assert settings.encoder == {**model, "dropout": 0.0, "max_len": 128}  # its windows' positions, its dropout
    assert "trainer" not in settings.recipe() and settings.recipe()["max_length"] == 128
    with pytest.raises(
        ConfigError, match=r"pretrain\.holdout=1 must be a number in \(0, 1\): e\.g\. pretrain\.holdout"
    ):
        PretrainConfig(holdout=1)
    with pytest.raises(
        ConfigError, match=r"pretrain\.mask_prb is not a setting of the pretraining: did you mean pretrain\.mask_prob"
    ):
        PretrainConfig.from_values({"mask_prb": 0.2})
    with pytest.raises(ConfigError, match=r"pretrain\.trainer\.max_epochs=0 trains nothing"):
        PretrainConfig(trainer={"max_epochs": 0})
