"""callbacks: which examples, when, at what cost; the test report; the config switch; and, after a
real toy training, attention maps that put visible weight on the negation."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import lightning as L
import numpy as np
import pytest
import torch
from conftest import ROOT, count_forwards
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from lightning.pytorch.loggers import TensorBoardLogger
from matplotlib.text import Text
from sklearn.metrics import precision_recall_fscore_support
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import plugin_data_pb2

from transformer_attention.callbacks import (
    AttentionMapLogger,
    ClassificationReport,
    pick_examples,
)
from transformer_attention.data import ReviewDataModule
from transformer_attention.inference import infer, predict
from transformer_attention.module import ClassifierModule
from transformer_attention.plotting import (
    AttentionGrid,
    RolloutBars,
    attention_rollout,
    pooled_rollout,
    save_attention_png,
)
from transformer_attention.plotting.html import read_attention_data
from transformer_attention.tensorboard_plugin.summary import read_page
from transformer_attention.training.builders import (
    TrainerBuilder,
    build_data,
    build_loggers,
    build_model,
    instantiate_group,
)
from transformer_attention.training.hparams import RESULT_KEYS, flatten_config, log_hyperparameters, result_hparams


def events(log_dir: Path) -> EventAccumulator:
    acc = EventAccumulator(str(log_dir), size_guidance={"images": 0, "scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


# ---- which examples ---------------------------------------------------------------------------
def test_pick_examples_mixes_classes_and_lengths():
    labels = [0] * 10 + [1] * 10
    lengths = list(range(10, 0, -1)) + list(range(1, 11))  # class 0 stored long to short
    picked = pick_examples(labels, lengths, 4)
    assert [labels[i] for i in picked] == [0, 1, 0, 1]  # classes in turn
    by_class = {c: [lengths[i] for i in picked if labels[i] == c] for c in (0, 1)}
    assert by_class == {0: [3, 8], 1: [3, 8]}  # the middles of the short and the long half, short first
    assert pick_examples(labels, lengths, 4) == picked  # deterministic


def test_pick_examples_small_and_uneven_data():
    assert sorted(pick_examples([0, 1, 1], [3, 4, 5], 10)) == [0, 1, 2]  # never more than there is, no repeats
    picked = pick_examples([0, 1, 1, 1, 1], [1, 2, 3, 4, 5], 3)
    assert len(set(picked)) == 3 and 0 in picked  # the rare class is not skipped
    assert [c for c in map([0, 1, 2, 0, 1, 2].__getitem__, pick_examples([0, 1, 2] * 2, [1] * 6, 2))] == [0, 1]


def test_flatten_config_for_hparams():
    flat = flatten_config({"model": {"d_model": 64, "opt": {"lr": 1e-3}}, "tags": [], "ckpt": None, "x": {}, "t": True})
    assert flat == {"model.d_model": 64, "model.opt.lr": 1e-3, "tags": "[]", "ckpt": "none", "x": "{}", "t": "True"}


def test_nothing_to_show_is_an_error():
    with pytest.raises(ValueError, match="callbacks.attention_maps=null"):
        AttentionMapLogger(num_examples=0)
    with pytest.raises(ValueError, match="every_n_epochs"):
        AttentionMapLogger(every_n_epochs=0)


# ---- a real fit, in process --------------------------------------------------------------------
def tiny(tmp_path: Path, callbacks: list, max_epochs: int) -> tuple[ReviewDataModule, ClassifierModule, L.Trainer]:
    L.seed_everything(0)
    dm = ReviewDataModule(name="toy", toy_size=300, max_length=32, batch_size=64, vocab_size=500, min_frequency=1)
    dm.setup("fit")
    module = ClassifierModule(
        vocab_size=dm.vocab_size,
        num_classes=dm.num_classes,
        d_model=16,
        num_heads=2,
        num_layers=2,
        dim_feedforward=32,
        dropout=0.1,
        tokenizer=dm.tokenizer_json(),
        label_names=dm.label_names,
    )
    trainer = L.Trainer(
        default_root_dir=tmp_path,
        max_epochs=max_epochs,
        accelerator="cpu",
        logger=TensorBoardLogger(tmp_path, name=None, version=""),
        callbacks=callbacks,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=1,
        log_every_n_steps=1,
    )
    return dm, module, trainer


class Fitted(NamedTuple):
    dm: ReviewDataModule
    module: ClassifierModule
    trainer: L.Trainer
    maps: AttentionMapLogger
    calls: list  # (batch size, training flags, grad enabled, sanity checking) of each need_weights forward
    log_dir: Path
    events: EventAccumulator  # what fit alone wrote


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> Fitted:
    """2 epochs, maps every 2nd validation epoch: validation 0 is logged, then the end of fit; the images are
    drawn and written on the callback's own thread (the default run draws them on the training thread, as
    test_tensorboard.py's sweep does)."""
    tmp = tmp_path_factory.mktemp("fit")
    maps = AttentionMapLogger(num_examples=3, every_n_epochs=2, texts=["the plot is not good"], background=True)
    dm, module, trainer = tiny(tmp, [maps, ClassificationReport()], max_epochs=2)
    calls = []
    forward = module.forward

    def spy(input_ids, attention_mask=None, need_weights=False):
        if need_weights:
            modes = {m.training for m in module.modules()}
            calls.append((input_ids.shape[0], modes, torch.is_grad_enabled(), trainer.sanity_checking))
        return forward(input_ids, attention_mask, need_weights=need_weights)

    module.forward = spy
    trainer.fit(module, datamodule=dm)
    module.forward = forward
    return Fitted(dm, module, trainer, maps, calls, tmp, events(tmp))


def test_metrics_logged_once_an_epoch_hold_every_batch_and_every_fit(tmp_path: Path):
    """train/acc, val/* and test/* are handed to Lightning once an epoch: their values still cover every batch (the
    epoch's accuracy over all its rows), and a second fit of the same module logs them in its first epoch too."""
    dm, module, trainer = tiny(tmp_path / "first", [], max_epochs=1)
    trainer.fit(module, datamodule=dm)
    second = L.Trainer(max_epochs=2, accelerator="cpu", logger=False, enable_checkpointing=False,
                       enable_progress_bar=False, enable_model_summary=False)  # fmt: skip
    epochs = []

    class Record(L.Callback):
        def on_train_epoch_end(self, trainer, pl_module):
            epochs.append({k: float(v) for k, v in trainer.callback_metrics.items()})

    second.callbacks.append(Record())
    dm.eval_batch_size = 8  # validation in several batches
    second.fit(module, datamodule=dm)
    assert [("train/acc" in e, "val/acc" in e, "val/loss" in e) for e in epochs] == [(True, True, True)] * 2
    module.eval()
    with torch.no_grad():
        preds = torch.cat(
            [module.net(b["input_ids"], b["attention_mask"]).logits.argmax(-1) for b in dm.val_dataloader()]
        )
    labels = torch.cat([b["labels"] for b in dm.val_dataloader()])
    assert len(dm.val_dataloader()) > 1
    assert epochs[-1]["val/acc"] == pytest.approx((preds == labels).float().mean().item())  # all the batches


def test_maps_logged_every_n_and_at_fit_end(fitted):
    steps_per_epoch = fitted.trainer.global_step // 2
    acc = fitted.events
    tags = [t for t in acc.Tags()["images"] if t.startswith("~attention/")]  # after the curves in TensorBoard
    names = ["example_0", "example_1", "example_2", "text_0"]
    expected = [f"~attention/{n}/{kind}" for n in names for kind in ("layer_0", "layer_1", "rollout", "text")]
    assert sorted(tags) == sorted(expected)
    for tag in tags:  # validation 0, not 1 (every 2nd), then the end of fit; never the sanity check (step 0)
        assert [e.step for e in acc.Images(tag)] == [steps_per_epoch, 2 * steps_per_epoch]
    pages = [t for t in acc.Tags()["tensors"] if t.startswith("attention/")]  # the ATTENTION tab's, each step
    assert sorted(pages) == sorted(f"attention/{n}" for n in names)
    for tag in pages:
        logged = acc.Tensors(tag)
        assert [e.step for e in logged] == [steps_per_epoch, 2 * steps_per_epoch]
        assert read_page(logged[-1].tensor_proto.string_val[0])["title"] == tag.split("/")[-1]


def test_maps_cost_little(fitted):
    # two forwards per logging: the maps, and the pages' weight x norm maps (TensorBoard's ATTENTION tab shows each
    # logged step's pages); the files written at the end are the last logged step's pages, not made again
    assert len(fitted.calls) == 4
    for batch, modes, grad, sanity in fitted.calls:
        assert batch == 4  # only the chosen examples (3 + 1 text), not the validation set
        assert modes == {False} and not grad and not sanity  # eval mode everywhere, no autograd graph


def test_examples_mix_classes_and_lengths(fitted):
    maps = fitted.maps
    picked = [e for e in maps.examples if e.name.startswith("example_")]
    assert {e.label for e in picked} == {0, 1} and len({len(e.ids) for e in picked}) > 1
    assert maps.examples[-1].label is None  # a text of your own has no true label


def test_interactive_views_written_at_fit_end(fitted):
    """One offline page per example in <run>/attention/, holding the attention of the last logged step."""
    pages = sorted(p.name for p in (fitted.log_dir / "attention").glob("*.html"))
    assert pages == ["example_0.html", "example_1.html", "example_2.html", "text_0.html"]
    last = fitted.maps.examples[-1]
    ids = last.ids
    page = (fitted.log_dir / "attention" / f"{last.name}.html").read_text(encoding="utf-8")
    data = read_attention_data(page)
    # the name is the title; the caption goes on with the text, the true label and the prediction, not the name again
    assert f"<h1>{last.name}</h1>" in page
    caption = re.search(r'<p class="caption">(.*?)</p>', page).group(1)
    assert caption.startswith("\u201c") and last.name not in caption
    (row,) = infer(fitted.module, [ids], pad_id=fitted.dm.pad_id, need_weights=True)  # the trained model
    assert data["tokens"] == [fitted.dm.tokenizer.id_to_token(int(t)) for t in ids]
    assert data["text"]["pooling"] == fitted.module.hparams.get("pooling", "cls")  # the text tab's pooled row
    for layer, weights in enumerate(row.attentions):
        np.testing.assert_allclose(np.array(data["layers"][layer]), weights.numpy(), atol=1e-4)


def test_log_maps_restores_modes_exactly(fitted):
    module, maps = fitted.module, fitted.maps
    module.train()
    module.net.head.eval()  # e.g. a frozen part: must stay in eval mode
    before = {name: m.training for name, m in module.named_modules()}
    maps.log_maps(fitted.trainer, module)
    assert {name: m.training for name, m in module.named_modules()} == before


def test_maps_and_predict_share_one_inference_path(fitted, monkeypatch):
    """The callback's maps, rollout and captions hold what predict() returns for the same text."""
    module, text = fitted.module, "the plot is not good at all"
    maps = AttentionMapLogger(num_examples=0, texts=[text], mean=False)
    maps.on_fit_start(fitted.trainer, module)
    drawn, bars = [], []
    render, render_bars = AttentionGrid.render, RolloutBars.render
    monkeypatch.setattr(AttentionGrid, "render", lambda g, m, s: drawn.append((m, s)) or render(g, m, s))
    monkeypatch.setattr(RolloutBars, "render", lambda b, x, s: bars.append(x) or render_bars(b, x, s))
    maps.log_maps(fitted.trainer, module)
    maps.wait()  # the writer thread has written this call's images
    (p,) = predict(module, [text], need_weights=True)
    _, grid, _ = maps.figures["text_0"]
    assert grid.labels == p.tokens
    assert len(drawn) == len(p.attentions)
    for (weights, status), expected in zip(drawn, p.attentions, strict=True):
        assert torch.equal(torch.as_tensor(weights), expected)
        assert f"pred: {p.label} (p={p.probabilities[p.label]:.2f})" in status
    np.testing.assert_allclose(bars[0], pooled_rollout(attention_rollout(p.attentions), "cls"), atol=1e-6)
    tables = events(fitted.log_dir).Tensors("~attention/examples/text_summary")
    assert any(
        f"| text_0 | {text} | - | {p.label} (p={p.probabilities[p.label]:.2f}) |"
        in t.tensor_proto.string_val[0].decode()
        for t in tables
    )


def test_norm_maps_log_the_norm_weighted_shares(fitted, monkeypatch, tmp_path):
    """kind=norm: every layer image holds `infer(..., need_norms=True)`'s maps with each row scaled to sum 1; the
    rollout reads them, the caption and the colour bars say so, and the page gets the map switch."""
    module, text = fitted.module, "the plot is not good at all"
    maps = AttentionMapLogger(num_examples=0, texts=[text], mean=False, kind="norm")
    maps.on_fit_start(fitted.trainer, module)
    drawn, bars, said = [], [], []
    render, render_bars, send = AttentionGrid.render, RolloutBars.render, maps.writer.send
    monkeypatch.setattr(AttentionGrid, "render", lambda g, m, s: drawn.append(m) or render(g, m, s))
    monkeypatch.setattr(RolloutBars, "render", lambda b, x, s: bars.append(x) or render_bars(b, x, s))
    monkeypatch.setattr(maps.writer, "send", lambda w, tag, step, d, *a: said.append(d) or send(w, tag, step, d, *a))
    maps.log_maps(fitted.trainer, module)
    maps.wait()
    (row,) = infer(module, [maps.examples[0].ids], need_norms=True)
    (weights,) = infer(module, [maps.examples[0].ids], need_weights=True)
    norms = [n.numpy() / n.numpy().sum(-1, keepdims=True) for n in row.attentions]  # each (H, T, T), rows sum 1
    assert len(drawn) == len(norms)
    for got, expected, w in zip(drawn, norms, weights.attentions, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)
        assert not np.allclose(got, w.numpy(), atol=1e-3)  # not the weights: the norms reweigh the keys
    np.testing.assert_allclose(bars[0], pooled_rollout(attention_rollout(norms), "cls"), atol=1e-6)
    assert said and all("maps: weight x norm" in d for d in said)
    _, grid, roll = maps.figures["text_0"]
    bar_texts = [[t.get_text() for t in f.fig.findobj(Text)] for f in (grid, roll, maps.views["text_0"])]
    assert all(any("weight x norm" in t for t in texts) for texts in bar_texts)
    (page,) = maps.write_pages(tmp_path)
    assert "norm" in read_attention_data(page.read_text(encoding="utf-8"))["kinds"]  # the page's switch


def test_a_map_kind_that_is_not_one_is_a_one_line_error():
    with pytest.raises(ValueError, match=r"kind='norms': not a map kind; use weight or norm"):
        AttentionMapLogger(kind="norms")


def test_the_maps_run_the_model_through_the_one_forward_function(fitted, monkeypatch):
    """Every forward of the model the callback logs goes through `inference.forward`, one for its examples."""
    module, maps = fitted.module, fitted.maps
    calls, hook = count_forwards(monkeypatch, module.net)
    try:
        maps.log_maps(fitted.trainer, module)
        maps.wait()
    finally:
        hook.remove()
    assert calls == {"forward": 1, "model": 1}


def test_hparams_session_is_read_back_and_a_live_reader_keeps_following(tmp_path):
    """The HPARAMS tab's data, as TensorBoard reads it: the settings that shape a result (the same columns in
    every run, "none" where a run lacks one), no plumbing, no experiment summary (TensorBoard builds it from all
    runs), no placeholder value in the scalar series; and a reader started mid-run still sees the later scalars."""
    lg = TensorBoardLogger(tmp_path, name=None, version="", default_hp_metric=False)
    config = {
        "model": {
            "_target_": "x.Module",
            "d_model": 64,
            "pooling": "cls",
            "optimizer": {"_partial_": True, "lr": 1e-3},
        },
        "data": {"name": "toy", "max_length": 64, "num_workers": 0},
        "callbacks": {"attention_maps": {"num_examples": 4}},
        "seed": 42,
        "tags": [],
    }
    log_hyperparameters([lg], config, overrides=["model.pooling=cls", "+callbacks.attention_maps.num_examples=4"])
    lg.log_metrics({"val/acc_best": 0.5}, step=3)
    lg.experiment.flush()
    live = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0, "tensors": 0})
    live.Reload()
    lg.log_metrics({"val/acc_best": 0.75}, step=6)
    lg.experiment.flush()
    live.Reload()
    assert [(e.step, e.value) for e in live.Scalars("val/acc_best")] == [(3, 0.5), (6, 0.75)]
    assert live.Tags()["scalars"] == ["val/acc_best"]

    content = live.PluginTagToContent("hparams")
    assert "_hparams_/experiment" not in content
    session = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"]).session_start_info
    hp = session.hparams
    assert list(result_hparams(config, columns=["callbacks.attention_maps.num_examples"]))[:2] == [
        "callbacks.attention_maps.num_examples",  # a sweep's varied key leads
        "data.name",
    ]
    assert set(hp) == {*RESULT_KEYS, "model.pooling", "model.d_model", "model.optimizer.lr"}  # the same in every run
    assert hp["data.vocab_size"].string_value == "none"  # a setting this run lacks: a value all the same
    assert hp["model.d_model"].number_value == 64 and hp["model.optimizer.lr"].number_value == 1e-3
    assert hp["data.name"].string_value == "toy"
    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 1  # the logger's own event file


def test_classification_report_matches_sklearn(fitted):
    dm, module, trainer = fitted.dm, fitted.module, fitted.trainer
    metrics = trainer.test(module, datamodule=dm, verbose=False)[0]
    preds, labels = [], []
    module.eval()
    with torch.no_grad():
        for batch in dm.test_dataloader():
            preds.append(module(batch["input_ids"], batch["attention_mask"]).logits.argmax(-1))
            labels.append(batch["labels"])
    p, r, f, _ = precision_recall_fscore_support(torch.cat(labels), torch.cat(preds), labels=[0, 1], zero_division=0)
    for c, name in enumerate(dm.label_names):
        assert metrics[f"test/precision/{name}"] == pytest.approx(p[c], abs=1e-6)
        assert metrics[f"test/recall/{name}"] == pytest.approx(r[c], abs=1e-6)
        assert metrics[f"test/f1/{name}"] == pytest.approx(f[c], abs=1e-6)
    acc = events(fitted.log_dir)
    assert "~test/confusion_matrix" in acc.Tags()["images"]
    assert "~test/report/text_summary" in acc.Tags()["tensors"]
    table = acc.Tensors("~test/report/text_summary")[-1].tensor_proto.string_val[0].decode()
    assert all(f"| {name} |" in table for name in dm.label_names)


# ---- the config switch -------------------------------------------------------------------------
@pytest.mark.parametrize("override, expected", [([], True), (["callbacks.attention_maps=null"], False)])
def test_config_switch(tmp_path, override, expected):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=[f"paths.output_dir={tmp_path}", *override])
    kinds = [type(c) for c in instantiate_group(cfg.callbacks)]
    assert (AttentionMapLogger in kinds) is expected
    assert ClassificationReport in kinds


# ---- the maps mean something -------------------------------------------------------------------
NEGATED = ["the plot is not good", "the acting was never boring", "i did not enjoy the script", "the cast is not bad"]


def attend(module: ClassifierModule, tokenizer, text: str) -> tuple[list[str], list[torch.Tensor]]:
    """The tokens of `text` and one (H, T, T) attention map per layer, in eval mode."""
    ids = tokenizer.encode(text).ids
    was = module.training
    module.eval()
    with torch.no_grad():
        out = module(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.bool), need_weights=True)
    module.train(was)
    return [tokenizer.id_to_token(i) for i in ids], [a[0] for a in out.attentions]


def cls_on_negation(tokens: list[str], maps: list[torch.Tensor]) -> torch.Tensor:
    """(L, H): the weight of the [CLS] query row, which the classifier reads, on "not" / "never"."""
    neg = next(i for i, t in enumerate(tokens) if t in ("not", "never"))
    return torch.stack(maps)[:, :, 0, neg]


@pytest.mark.slow
def test_toy_training_attends_to_the_negation(tmp_path):
    """Default toy config, 3 epochs: in every negated review the [CLS] query puts at least 3x the
    uniform weight on "not" / "never" in some head, and the head average at least 2x in some
    layer; the same model untrained does neither (its maps are near uniform)."""
    overrides = [
        "trainer.max_epochs=3",  # after 2 the validation accuracy sits at 0.90 to 0.93, by the draw of dropout
        f"paths.output_dir={tmp_path}",
        "trainer.enable_progress_bar=false",
        "callbacks.attention_maps.num_examples=0",
        f"callbacks.attention_maps.texts=[{NEGATED[0]}]",
        "callbacks.model_checkpoint=null",
        "callbacks.classification_report=null",
    ]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    L.seed_everything(cfg.seed)
    trainers = TrainerBuilder(cfg.trainer, instantiate_group(cfg.callbacks), build_loggers(cfg.logger))
    dm = build_data(cfg.data, output_dir=str(tmp_path))
    dm.setup("fit")
    module = build_model(instantiate(cfg.model, _partial_=True), dm)
    trainer = trainers.for_model(module, dm)
    before = {text: cls_on_negation(*attend(module, dm.tokenizer, text)) for text in NEGATED}
    trainer.fit(module, datamodule=dm)
    assert trainer.callback_metrics["val/acc"] > 0.9  # it learned the task, where negation decides a ninth

    for text in NEGATED:
        tokens, maps = attend(module, dm.tokenizer, text)
        w, w0, uniform = cls_on_negation(tokens, maps), before[text], 1 / len(tokens)
        assert w.max() >= 3 * uniform and w.mean(dim=1).max() >= 2 * uniform, (text, w)
        assert w0.max() < 2 * uniform and w0.mean(dim=1).max() < 1.5 * uniform, (text, w0)
        for layer, m in enumerate(maps):  # to look at: pytest --basetemp=DIR keeps them
            save_attention_png(tmp_path / "maps" / f"{text.replace(' ', '_')}_layer{layer}.png", tokens, m, text)

    acc = events(Path(cfg.logger.tensorboard.save_dir))  # logged after validations 0 and 2 (every 2nd): epochs 1, 3
    per_epoch = trainer.global_step // 3
    assert [e.step for e in acc.Images("~attention/text_0/layer_1")] == [per_epoch, 3 * per_epoch]


def test_every_card_of_a_two_class_run_explains_the_same_class(fitted, monkeypatch):
    """The text image's signed paragraph explains the second class on every card, whatever each one predicts: blue
    means the same on all of them; its label names that class."""
    from transformer_attention.callbacks import attention_maps

    module, maps, asked = fitted.module, fitted.maps, []
    rows = attention_maps.text_rows
    monkeypatch.setattr(attention_maps, "text_rows", lambda *a, **kw: asked.append(kw) or rows(*a, **kw))
    maps.log_maps(fitted.trainer, module)
    maps.wait()
    predicted = {int(r.probabilities.argmax()) for r in infer(module, [e.ids for e in maps.examples])}
    names = fitted.dm.label_names
    assert len(asked) == len(maps.examples) and len(predicted) == 2  # both classes predicted among the cards
    assert {(kw["predicted"], kw["class_name"]) for kw in asked} == {(1, names[1])}
