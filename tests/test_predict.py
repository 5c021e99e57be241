"""Using a trained model: the one inference path (`inference.forward`, `infer` on it), the predict() API on it,
`python predict.py` and `python evaluate.py` on a checkpoint alone, in fresh processes and from another working
directory."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ROOT, TINY, count_forwards, entry_env, run_dirs, run_warm
from test_checkpoint import tiny_module
from test_train import final_metrics

from transformer_attention.analysis.faithfulness import explain_texts
from transformer_attention.analysis.heads import head_importance
from transformer_attention.data import collate, load_tokenizer
from transformer_attention.data.tokenizer import encode
from transformer_attention.errors import InputError
from transformer_attention.inference import Prediction, batched, forward, infer, predict, probabilities
from transformer_attention.model import TransformerClassifier
from transformer_attention.module import ClassifierModule
from transformer_attention.tasks.predict import read_texts
from transformer_attention.training.checkpoint import load_module

SENTENCES = ["the acting was not bad at all", "a dull film", "great fun, but the ending is weak"]


# ---- the one inference path ---------------------------------------------------------------------
def modes(module: torch.nn.Module) -> dict[str, bool]:
    return {name: m.training for name, m in module.named_modules()}


def test_infer_runs_in_eval_without_grad_and_restores_every_mode_exactly():
    module = tiny_module().train()
    module.net.head.eval()  # a frozen part of a training model: must stay in eval mode, the rest in train
    before = modes(module)
    seen = []
    module.net.register_forward_hook(lambda m, args, out: seen.append((modes(module), torch.is_grad_enabled())))
    infer(module, [[2, 5, 6], [2, 7]], need_weights=True)
    ((during, grad),) = seen  # one forward for both rows
    assert set(during.values()) == {False} and not grad
    assert modes(module) == before
    with pytest.raises(IndexError):  # a token id beyond the vocabulary: the forward raises ...
        infer(module, [[2, 10**6]])
    assert modes(module) == before  # ... and the modes are restored all the same


def test_infer_rows_are_what_the_model_gives_each_row_alone():
    module = tiny_module()
    ids = encode(load_tokenizer(module.tokenizer_json), SENTENCES, 32)
    rows = infer(module, ids, need_weights=True)
    in_twos = infer(module, ids, need_weights=True, batch_size=2)
    module.eval()
    for row_ids, row, other in zip(ids, rows, in_twos, strict=True):
        T = len(row_ids)
        batch = collate([{"input_ids": row_ids, "labels": 0}])
        with torch.no_grad():
            alone = module(batch["input_ids"], batch["attention_mask"], need_weights=True)
        torch.testing.assert_close(row.logits, alone.logits[0])
        torch.testing.assert_close(row.probabilities, alone.logits[0].softmax(-1))
        assert row.probabilities.dtype == torch.float32 and row.probabilities.device.type == "cpu"
        assert len(row.attentions) == module.hparams.num_layers
        for weights, expected, chunked in zip(row.attentions, alone.attentions, other.attentions, strict=True):
            assert weights.shape == (module.hparams.num_heads, T, T)  # padding cut off
            torch.testing.assert_close(weights, expected[0])
            torch.testing.assert_close(chunked, weights)
    assert infer(module, ids)[0].attentions is None and infer(module, []) == []
    with pytest.raises(ValueError, match="batch_size=0"):
        infer(module, ids, batch_size=0)


def test_batches_hold_the_rows_in_order_or_shortest_first_with_their_indices():
    module = tiny_module()
    rows = [[2, 5, 6, 7], [2, 8], [2, 5, 6], [2, 9]]
    (one,) = batched(module, rows)
    assert one.index == [0, 1, 2, 3] and one.labels is None
    assert one.ids.tolist() == [[2, 5, 6, 7], [2, 8, 0, 0], [2, 5, 6, 0], [2, 9, 0, 0]]
    assert one.mask.tolist() == [[True] * 4, [True] * 2 + [False] * 2, [True] * 3 + [False], [True] * 2 + [False] * 2]
    short, long = batched(module, rows, batch_size=2, by_length=True, labels=[1, 0, 1, 0])
    assert (short.index, long.index) == ([1, 3], [2, 0]) and short.ids.shape == (2, 2)  # little padding
    assert long.labels.tolist() == [1, 1]
    p = probabilities(module, rows, batch_size=2)  # back in the rows' order, float64
    assert p.dtype == np.float64
    for row, expected in zip(infer(module, rows), p, strict=True):
        np.testing.assert_allclose(row.probabilities.numpy(), expected, atol=1e-6)


def test_every_forward_goes_through_the_one_forward_function(monkeypatch):
    """predict, infer and the analyses (their gradient passes, captum's included) run the model through
    `inference.forward` only: each of the model's forward calls is one of its calls."""
    module = tiny_module()
    calls, _ = count_forwards(monkeypatch, module.net)
    rows = encode(load_tokenizer(module.tokenizer_json), SENTENCES, 32)
    seen = []
    for run in (
        lambda: predict(module, SENTENCES, need_weights=True),
        lambda: infer(module.net, rows, batch_size=2),
        lambda: head_importance(module.net, rows, [0, 1, 0], batch_size=2),
        lambda: explain_texts(module.net, rows, mask_id=3, ig_steps=4, batch_size=8),
    ):
        before = calls["forward"]
        run()
        seen.append(calls["forward"] - before)
        assert calls["model"] == calls["forward"]
    assert min(seen) > 0, seen


def test_the_device_and_the_pad_id_are_looked_up_in_one_place():
    """No module but inference.py finds the model's device or its pad id; the analyses and callbacks run no model
    and set no grad mode of their own, and only analysis/run.py holds the eval mode (for all its passes at once)."""
    src = ROOT / "src" / "transformer_attention"
    for pattern in (r"\.parameters\(\)\)\.device", r"getattr\(.*[\"']pad_id[\"']|\.get\([\"']pad_id[\"']"):
        users = sorted(p.relative_to(src).as_posix() for p in src.rglob("*.py") if re.search(pattern, p.read_text()))
        assert users == ["inference.py"], (pattern, users)
    callbacks = [src / "callbacks" / "attention_maps.py", src / "callbacks" / "analysis.py"]
    for path in [*(src / "analysis").glob("*.py"), *callbacks]:
        assert not re.search(r"no_grad|\bmodel\(|\bnet\(", path.read_text()), path.name
        assert ("evaluating(" in path.read_text()) == (path.name == "run.py"), path.name


# ---- the Python API, no training ----------------------------------------------------------------
def test_predict_returns_one_consistent_result_per_text():
    module = tiny_module()
    preds = predict(module, SENTENCES)
    assert [p.text for p in preds] == SENTENCES and all(isinstance(p, Prediction) for p in preds)
    for p in preds:
        assert sum(p.probabilities.values()) == pytest.approx(1.0, abs=1e-6)
        assert p.label == max(p.probabilities, key=p.probabilities.get)
        assert p.label == ["negative", "positive"][p.label_id]
        assert p.tokens[0] == "[CLS]" and p.attentions is None
        assert json.loads(json.dumps(p.to_dict()))["label"] == p.label


def test_attention_weights_are_per_layer_head_and_real_token():
    module = tiny_module()
    (p,) = predict(module, ["not good at all"], need_weights=True)
    T, H = len(p.tokens), module.hparams.num_heads
    assert len(p.attentions) == module.hparams.num_layers
    for weights in p.attentions:
        assert weights.shape == (H, T, T)
        torch.testing.assert_close(weights.sum(-1), torch.ones(H, T))  # each query's weights: a distribution


def test_batching_and_padding_do_not_change_predictions():
    module = tiny_module()
    together = predict(module, SENTENCES, need_weights=True)
    alone = [predict(module, [s], need_weights=True)[0] for s in SENTENCES]
    one_by_one = predict(module, SENTENCES, batch_size=1)
    for a, b, c in zip(together, alone, one_by_one, strict=True):
        for name in a.probabilities:
            assert a.probabilities[name] == pytest.approx(b.probabilities[name], abs=1e-6)
            assert a.probabilities[name] == pytest.approx(c.probabilities[name], abs=1e-6)
        for wa, wb in zip(a.attentions, b.attentions, strict=True):
            torch.testing.assert_close(wa, wb)


def test_predict_leaves_the_module_mode_and_takes_a_single_string():
    module = tiny_module().train()
    (p,) = predict(module, "a dull film")
    assert module.training and p.text == "a dull film"


def test_read_texts_combines_and_explains(tmp_path: Path):
    f = tmp_path / "reviews.txt"
    f.write_text("first review\n\n  second review  \n", encoding="utf-8")
    assert read_texts("one", ["two", "three"], str(f)) == ["one", "two", "three", "first review", "second review"]
    with pytest.raises(InputError, match="text_file"):
        read_texts()
    with pytest.raises(InputError, match="missing.txt.*does not exist"):
        read_texts(text_file=str(tmp_path / "missing.txt"))
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(InputError, match="latin1.txt.*UTF-8"):
        read_texts(text_file=str(tmp_path / "latin1.txt"))


# ---- a trained checkpoint ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(tiny_run) -> tuple[Path, dict[str, float]]:
    """One tiny training run (conftest's, shared): its run folder and the metrics it printed."""
    run, stdout = tiny_run
    return run, final_metrics(stdout)


@pytest.mark.slow
def test_load_from_checkpoint_is_the_python_api(trained):
    run, _ = trained
    path = run / "checkpoints" / "last.ckpt"
    lightning_loaded = ClassifierModule.load_from_checkpoint(path, map_location="cpu")
    safe_loaded = load_module(path)
    a, b = predict(lightning_loaded, SENTENCES), predict(safe_loaded, SENTENCES)
    assert [p.probabilities for p in a] == [p.probabilities for p in b]
    assert lightning_loaded.hparams.label_names == ["negative", "positive"]


@pytest.mark.slow
def test_predict_entry_from_a_checkpoint_alone(trained, tmp_path: Path):
    """A fresh process in another directory, with the .ckpt copied away from its run folder."""
    run, _ = trained
    ckpt = tmp_path / "model.ckpt"
    ckpt.write_bytes((run / "checkpoints" / "last.ckpt").read_bytes())
    log_dir = tmp_path / "outputs"
    texts = json.dumps(SENTENCES[1:])
    proc = run_warm(
        "predict.py",
        f"ckpt_path={ckpt}",
        f"text={SENTENCES[0]}",
        f"texts={texts}",
        "save_attention=true",
        f"paths.log_dir={log_dir}",
        cwd=tmp_path,
        timeout=120,
    )
    expected = predict(load_module(ckpt), SENTENCES)
    for p in expected:
        line = next(line for line in proc.stdout.splitlines() if line.endswith(f"| {p.text}"))
        assert line.split()[0] == p.label
        for name, prob in p.probabilities.items():
            assert f"{name}={prob:.4f}" in line

    (run_dir,) = run_dirs(log_dir, "predict")
    records = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    assert [r["text"] for r in records] == SENTENCES
    for r, p in zip(records, expected, strict=True):
        assert r["label"] == p.label and r["tokens"] == p.tokens
        assert r["probabilities"] == pytest.approx(p.probabilities, abs=1e-6)
        (png,) = r["attention_png"]  # TINY: one layer
        assert Path(png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert Path(r["rollout_png"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert Path(r["text_png"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # the words shaded by the pooled row
    assert len(list((run_dir / "attention").glob("*_layer*.png"))) == len(SENTENCES)
    assert len(list((run_dir / "attention").glob("*_rollout.png"))) == len(SENTENCES)


@pytest.mark.slow
def test_predict_entry_reads_stdin(trained, tmp_path: Path):
    run, _ = trained
    cmd = [
        sys.executable,
        str(ROOT / "predict.py"),
        f"ckpt_path={run / 'checkpoints' / 'last.ckpt'}",
        "text_file=-",
        f"paths.log_dir={tmp_path / 'outputs'}",
    ]
    proc = subprocess.run(
        cmd,
        input="a dull film\n\nnot bad at all\n",
        cwd=tmp_path,
        env=entry_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sum(line.endswith(("| a dull film", "| not bad at all")) for line in proc.stdout.splitlines()) == 2


@pytest.mark.slow
def test_predict_takes_texts_quoted_as_the_guide_shows(trained, tmp_path: Path):
    """The command lines docs/using-models.md gives, run by a shell: a comma, an apostrophe and other scripts
    reach the model whole."""
    from test_console import TEXTS, documented

    run, _ = trained
    ckpt = run / "checkpoints" / "last.ckpt"
    options = {"cwd": tmp_path, "env": entry_env(), "capture_output": True, "text": True, "timeout": 120}
    for text in (TEXTS[2], TEXTS[1]):  # a comma and two scripts, in single quotes; an apostrophe, escaped
        command = f"{shlex.quote(sys.executable)} {ROOT / 'predict.py'} ckpt_path={ckpt} {documented('text', text)}"
        proc = subprocess.run(f"{command} paths.log_dir={tmp_path / 'outputs'}", shell=True, **options)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert [line for line in proc.stdout.splitlines() if line.endswith(f"| {text}")], proc.stdout


@pytest.mark.slow
def test_predict_entry_without_text_explains(trained, tmp_path: Path):
    run, _ = trained
    proc = run_warm(
        "predict.py",
        f"ckpt_path={run / 'checkpoints' / 'last.ckpt'}",
        f"paths.log_dir={tmp_path / 'outputs'}",
        cwd=tmp_path,
        check=False,
        timeout=120,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "input error: nothing to classify" in proc.stderr and "text_file" in proc.stderr


@pytest.mark.slow
def test_evaluate_reproduces_the_training_test_metrics(trained, tmp_path: Path):
    """train.py tested its best checkpoint; evaluate.py on that file alone prints the same numbers."""
    run, train_metrics = trained
    (best,) = (run / "checkpoints").glob("epoch_*.ckpt")
    training_logs = sorted(run.glob("events.out.tfevents.*"))
    log_dir = tmp_path / "outputs"
    data_overrides = [o for o in TINY if o.startswith("data.")]
    proc = run_warm(
        "evaluate.py",
        f"ckpt_path={best}",
        *data_overrides,
        "trainer.enable_progress_bar=false",
        f"paths.log_dir={log_dir}",
        cwd=tmp_path,
        timeout=180,
    )
    block = proc.stdout.split("test metrics of", 1)[1]
    metrics = {k: float(v) for k, v in re.findall(r"^\s+(\S+)\s+([-\d.eE+]+)$", block, flags=re.M)}
    for name in ("test/acc", "test/f1", "test/loss"):
        assert metrics[name] == train_metrics[name], name
    (run_dir,) = run_dirs(log_dir, "evaluate")  # its own folder; the training run's logs are untouched
    assert f"({run_dir.relative_to(tmp_path)}):" in proc.stdout  # relative to where it ran, as train.py prints
    assert list(run_dir.glob("events.out.tfevents.*"))
    assert sorted(run.glob("events.out.tfevents.*")) == training_logs


def test_forward_runs_in_eval_mode_and_leaves_every_mode_as_it_found_it():
    """A training model (with a frozen, eval-mode part) gives its eval-mode logits, every mode restored after; a model
    all in eval mode, as the analyses hold theirs, gives the same logits and stays in eval mode."""
    torch.manual_seed(0)
    net = TransformerClassifier(vocab_size=30, num_classes=2, d_model=16, num_heads=2, num_layers=2, dropout=0.5)
    ids, mask = torch.randint(3, 30, (3, 7)), torch.ones(3, 7, dtype=torch.bool)
    mask[0, 4:] = False
    expected = net.eval()(ids, mask).logits
    net.train()
    net.head.eval()
    before = {name: m.training for name, m in net.named_modules()}
    assert torch.equal(forward(net, ids, mask).logits, expected)
    assert {name: m.training for name, m in net.named_modules()} == before
    net.eval()
    assert torch.equal(forward(net, ids, mask).logits, expected)
    assert not any(m.training for m in net.modules())
