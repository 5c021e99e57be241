"""What the console and TensorBoard name: paths relative to where the command ran, as train.py prints them, and
TensorBoard's groups in the order its tabs open on."""

from __future__ import annotations

from omegaconf import OmegaConf

from transformer_attention.cli import summary


def test_the_sweep_summary_prints_relative_paths(tmp_path, monkeypatch, capsys):
    sweep = tmp_path / "outputs" / "train" / "multiruns" / "2026-12-04_19-00-00-000000"
    sweep.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(summary, "summary_rows", lambda *a, **k: [{"job": "0", "test/acc": "0.9"}])
    monkeypatch.setattr(summary, "failures", lambda folder: [])
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}, "sweeper": {}}, "optimized_metric": "test/acc"})
    summary.SweepSummary().on_multirun_end(config)
    out = capsys.readouterr().out
    relative = "outputs/train/multiruns/2026-12-04_19-00-00-000000"
    assert f"sweep summary ({relative}), best first" in out and f"written to {relative}/summary.csv" in out
    assert str(tmp_path) not in out


def test_tensorboard_opens_on_the_validation_curves_and_the_maps():
    """TIME SERIES opens its first two groups, sorted by name; IMAGES its first: `val`, then the maps."""
    from transformer_attention.plotting.tags import tensorboard_tag

    tags = ["train/acc", "train/loss_step", "val/acc", "val/loss", "test/acc", "analysis/heads",
            "attention/example_0/layer_0", "test/confusion_matrix"]  # fmt: skip
    written = [tensorboard_tag(t) for t in tags]
    groups = sorted({t.split("/")[0] for t in written})
    assert groups == ["val", "~attention", "~model_analysis", "~test", "~train"]
    assert "val/acc" in written and "~train/acc" in written  # validation curves keep their names
    assert tensorboard_tag(tensorboard_tag("train/acc")) == "~train/acc"  # written once, never twice
