"""Checkpoint safety: weights_only loading, and clear errors (naming the path, no traceback) for
missing, truncated and foreign files, in Python and from every entry point."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch
from conftest import run_warm
from omegaconf import OmegaConf

from transformer_attention.data import train_tokenizer
from transformer_attention.errors import CheckpointError
from transformer_attention.files import run_dir_of
from transformer_attention.module import ClassifierModule
from transformer_attention.training.checkpoint import load_checkpoint, load_module
from transformer_attention.training.resume import check_matches

TEXTS = ["a good film", "a bad film", "not good at all", "not bad at all", "the plot is dull", "great acting"]


def tiny_module(seed: int = 0) -> ClassifierModule:
    """A small untrained classifier with a real tokenizer, as train.py would build it."""
    torch.manual_seed(seed)
    tok = train_tokenizer(TEXTS, vocab_size=200, min_frequency=1)
    return ClassifierModule(
        vocab_size=tok.get_vocab_size(),
        num_classes=2,
        d_model=16,
        num_heads=2,
        num_layers=2,
        dim_feedforward=32,
        dropout=0.0,
        tokenizer=tok.to_str(),
        label_names=["negative", "positive"],
    )


def save_like_lightning(module: ClassifierModule, path: Path) -> Path:
    """The keys a Lightning checkpoint of ClassifierModule holds that loading needs (plain data only)."""
    ckpt = {"state_dict": module.state_dict(), "hyper_parameters": dict(module.hparams), "epoch": 0, "global_step": 0}
    module.on_save_checkpoint(ckpt)
    torch.save(ckpt, path)
    return path


@pytest.fixture
def ckpt_file(tmp_path: Path) -> Path:
    return save_like_lightning(tiny_module(), tmp_path / "model.ckpt")


# what a train.py checkpoint held before the model's settings became one EncoderConfig (2026-11-29):
# flat hyperparameters and these parameter names (a 1-layer model)
PREVIOUS_HPARAMS = {
    "vocab_size": 40,
    "num_classes": 2,
    "d_model": 16,
    "num_heads": 2,
    "num_layers": 1,
    "dim_feedforward": 32,
    "max_len": 512,
    "dropout": 0.1,
    "attention_dropout": None,
    "attention_impl": "math",
    "pooling": "cls",
    "pad_id": 0,
    "norm_first": False,
    "activation": "relu",
    "positional": "sinusoidal",
    "label_smoothing": 0.0,
    "label_names": ["negative", "positive"],
}
PREVIOUS_PARAMETERS = (
    ["net.embedding.weight"]
    + [
        f"net.encoder.layers.0.{m}.{p}"
        for m in (*(f"self_attn.w_{x}" for x in "qkvo"), "linear1", "linear2", "norm1", "norm2")
        for p in ("weight", "bias")
    ]
    + ["net.head.weight", "net.head.bias"]
)


def test_a_checkpoint_of_the_previous_version_loads_and_predicts(tmp_path: Path):
    module = ClassifierModule(**PREVIOUS_HPARAMS, tokenizer=tiny_module().tokenizer_json)
    assert list(module.state_dict()) == PREVIOUS_PARAMETERS
    torch.manual_seed(1)
    state = {k: torch.randn_like(v) for k, v in module.state_dict().items()}
    ckpt = {"state_dict": state, "hyper_parameters": PREVIOUS_HPARAMS, "tokenizer": module.tokenizer_json}
    torch.save(ckpt, tmp_path / "previous.ckpt")
    loaded = load_module(tmp_path / "previous.ckpt")
    assert loaded.net.config.attention_impl == "math" and loaded.net.config.attention_dropout is None
    ids = torch.tensor([[2, 5, 6, 7, 0]])
    module.load_state_dict(state)
    torch.testing.assert_close(loaded(ids).logits, module.eval()(ids).logits, rtol=0, atol=0)


def test_a_checkpoint_of_another_version_fails_in_one_line(ckpt_file: Path, tmp_path: Path):
    ckpt = torch.load(ckpt_file, weights_only=True)
    ckpt["hyper_parameters"]["rotary_base"] = 10000  # a setting this version does not have
    torch.save(ckpt, tmp_path / "other.ckpt")
    with pytest.raises(CheckpointError) as err:
        load_module(tmp_path / "other.ckpt")
    message = str(err.value)
    assert "\n" not in message and "another version" in message and "rotary_base" in message and "retrain" in message


def test_load_module_rebuilds_the_same_model(ckpt_file: Path):
    original = tiny_module().eval()
    loaded = load_module(ckpt_file)
    assert not loaded.training and loaded.tokenizer_json == original.tokenizer_json
    assert loaded.hparams.label_names == ["negative", "positive"]
    ids = torch.tensor([[2, 5, 6, 7, 0], [2, 8, 9, 0, 0]])
    torch.testing.assert_close(loaded(ids).logits, original(ids).logits, rtol=0, atol=0)


def test_checkpoints_are_plain_data(ckpt_file: Path):
    torch.load(ckpt_file, weights_only=True)  # no pickled classes: loads without trusting the file


def test_missing_path_names_it_and_the_checkpoints_beside_it(ckpt_file: Path):
    missing = ckpt_file.parent / "nope.ckpt"
    with pytest.raises(CheckpointError, match="does not exist") as err:
        load_checkpoint(missing)
    assert str(missing) in str(err.value) and "model.ckpt" in str(err.value)


def test_truncated_file_is_a_clear_error(ckpt_file: Path, tmp_path: Path):
    cut = tmp_path / "cut.ckpt"
    cut.write_bytes(ckpt_file.read_bytes()[:2000])
    with pytest.raises(CheckpointError, match="truncated") as err:
        load_checkpoint(cut)
    assert str(cut) in str(err.value)


def test_a_folder_lists_its_checkpoints(ckpt_file: Path):
    with pytest.raises(CheckpointError, match="is a folder") as err:
        load_checkpoint(ckpt_file.parent)
    assert "model.ckpt" in str(err.value)


def test_foreign_checkpoint_is_refused(tmp_path: Path):
    foreign = tmp_path / "resnet.pt"
    torch.save({"weights": torch.zeros(3)}, foreign)
    with pytest.raises(CheckpointError, match="not a train.py checkpoint"):
        load_checkpoint(foreign)
    no_tokenizer = tmp_path / "other_lightning.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {"lr": 0.1}}, no_tokenizer)
    with pytest.raises(CheckpointError, match="not a transformer-attention classifier checkpoint"):
        load_checkpoint(no_tokenizer)


class _WritesAFile:
    """Unpickling this would create a file: what a malicious checkpoint could do."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self):
        return (open, (str(self.target), "w"))


def test_pickled_code_never_runs(tmp_path: Path):
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.ckpt"
    with open(evil, "wb") as f:
        pickle.dump({"state_dict": _WritesAFile(marker)}, f)
    with pytest.raises(CheckpointError, match="more than plain data") as err:
        load_checkpoint(evil)
    assert str(evil) in str(err.value)
    assert not marker.exists()


def test_run_dir_of_finds_hydra_run_folders(tmp_path: Path):
    run = tmp_path / "outputs" / "train" / "runs" / "2024-01-01_00-00-00-000000"
    (run / ".hydra").mkdir(parents=True)
    (run / "checkpoints").mkdir()
    ckpt = run / "checkpoints" / "last.ckpt"
    ckpt.write_bytes(b"x")
    assert run_dir_of(ckpt) == run.resolve()
    loose = tmp_path / "last.ckpt"
    loose.write_bytes(b"x")
    assert run_dir_of(loose) is None and run_dir_of(None) is None
    assert run_dir_of(run / "checkpoints" / "no.ckpt") is None


def test_resume_with_another_model_names_the_keys(ckpt_file: Path):
    ckpt = load_checkpoint(ckpt_file)
    check_matches(ckpt, OmegaConf.create({"d_model": 16, "num_heads": 2, "_target_": "x"}), ckpt_file)
    with pytest.raises(CheckpointError) as err:
        check_matches(ckpt, OmegaConf.create({"d_model": 64, "num_heads": 2, "num_layers": 3}), ckpt_file)
    message = str(err.value)
    assert "model.d_model=64 (checkpoint: 16)" in message and "model.num_layers=3 (checkpoint: 2)" in message
    assert "num_heads" not in message


@pytest.mark.slow
@pytest.mark.parametrize(
    ("script", "case", "extra"),
    [
        ("predict.py", "missing", ["text=great"]),
        ("evaluate.py", "truncated", []),
        ("train.py", "truncated", []),
    ],
)
def test_entry_points_report_bad_checkpoints_without_a_traceback(
    script: str, case: str, extra: list[str], ckpt_file: Path, tmp_path: Path
):
    bad = tmp_path / f"{case}.ckpt"
    if case == "truncated":
        bad.write_bytes(ckpt_file.read_bytes()[:1000])
    proc = run_warm(
        script,
        f"ckpt_path={bad}",
        f"paths.log_dir={tmp_path / 'outputs'}",
        *extra,
        cwd=tmp_path,
        check=False,
        timeout=120,
    )
    assert proc.returncode != 0
    assert "checkpoint error" in proc.stderr and str(bad) in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
