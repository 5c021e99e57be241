"""The sweep summary names its folder and file as train.py does: relative to where the command ran."""

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
