"""A map of a long text shows a window of its tokens, coloured as the whole text: on the `uniform` scale an even
spread over the text's n tokens is drawn at the colour bar's half, whatever the window keeps."""

from __future__ import annotations

import numpy as np
import pytest

from transformer_attention.callbacks import AttentionMapLogger
from transformer_attention.callbacks.examples import Example
from transformer_attention.plotting import (
    AttentionGrid,
    RolloutBars,
    attention_rollout,
    figure_to_array,
    key_window,
    plot_attention,
    plot_rollout,
    pooled_rollout,
    scaled,
)
from transformer_attention.plotting.style import colors

T, SHOWN = 167, 24
HALF = colors(np.array([0.5]))[0]  # the colour the uniform scale's bar says an even spread has
TOKENS = ["[CLS]"] + [f"w{i}" for i in range(T - 1)]


def even(heads: int = 2) -> np.ndarray:
    return np.full((heads, T, T), 1 / T, dtype=np.float32)  # (H, T, T): every query reads every key alike


def cells(grid: AttentionGrid, image: np.ndarray, panel: int = 0) -> np.ndarray:
    """The (n, n, 3) colours at the centres of a rendered grid's panel."""
    top, left = grid.boxes[panel]
    centres = (np.arange(grid.n) + 0.5) * grid.cell
    return image[top + centres.astype(int)][:, left + centres.astype(int)]


def test_a_window_of_an_even_spread_is_drawn_at_half():
    keep = list(range(SHOWN))
    grid = AttentionGrid(TOKENS[:SHOWN], ["head 0", "head 1"], "long", status=True, length=T)
    image = grid.render(even()[:, keep][:, :, keep], "step 1")
    assert (cells(grid, image) == HALF).all() and (cells(grid, image, 1) == HALF).all()
    cut = AttentionGrid(TOKENS[:SHOWN], ["head 0", "head 1"], "long", status=True)  # no length: n = 24, too dark
    assert not (cells(cut, cut.render(even()[:, keep][:, :, keep], "step 1")) == HALF).any()


def test_plot_attention_and_rollout_colour_a_long_text_as_the_whole_text():
    fig = plot_attention(TOKENS, even(), "long", max_tokens=SHOWN)
    image, ax = figure_to_array(fig), fig.axes[0]
    x, y = ax.transData.transform((3, 5))  # a cell's centre, display pixels from the bottom left
    assert (image[int(round(image.shape[0] - y)), int(round(x))] == HALF).all()
    layers = [even(), even()]
    bars = plot_rollout(TOKENS, layers, "long", max_tokens=SHOWN)
    rolled = pooled_rollout(attention_rollout(layers), "cls")
    shares = rolled[key_window(rolled, SHOWN)]
    drawn = np.array([b.get_facecolor()[:3] for b in bars.axes[0].patches]) * 255
    np.testing.assert_allclose(drawn, colors(scaled(shares, "uniform", T)), atol=0.5)
    assert not np.allclose(drawn, colors(scaled(shares, "uniform")), atol=0.5)  # n = 24 would be darker


def test_the_logger_builds_its_figures_for_the_whole_text():
    maps = AttentionMapLogger(num_examples=0, texts=["x"], max_tokens=SHOWN)
    example = Example("text_0", list(range(T)), None, "a long text")
    grid, bars = maps._figures(example, TOKENS, list(range(SHOWN)), heads=2, names=["neg", "pos"], pooling="cls")
    assert (grid.n, grid.length) == (SHOWN, T)
    assert bars is not None and (bars.n, bars.length) == (SHOWN, T)
    image = bars.render(np.full(SHOWN, 1 / T), "step 1")
    top = bars.top + bars.ROW_PX // 2  # the first bar's middle row, its first pixels
    assert (image[top, bars.left : bars.left + 2] == HALF).all()


def test_a_length_shorter_than_the_tokens_shown_is_an_error():
    with pytest.raises(ValueError, match="length=3: a text shown with 4 tokens has at least 4"):
        RolloutBars(TOKENS[:4], length=3)


def test_a_one_layer_text_view_shows_the_review_once(tmp_path, monkeypatch):
    """Layer 0 and a 1-layer rollout read the same: the text image has the layer's paragraph, not a copy of it, and
    no rollout image repeats the layer's."""
    import lightning as L
    from lightning.pytorch.loggers import TensorBoardLogger
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from transformer_attention.data.datamodule import ReviewDataModule
    from transformer_attention.module import ClassifierModule
    from transformer_attention.plotting import ReviewText

    L.seed_everything(0)
    data = ReviewDataModule(name="toy", toy_size=200, max_length=16, batch_size=32, vocab_size=100, min_frequency=1)
    data.setup("fit")
    labels = []
    render = ReviewText.render
    monkeypatch.setattr(
        ReviewText, "render", lambda v, p, names, s: labels.append(list(names)) or render(v, p, names, s)
    )
    for layers in (1, 2):
        module = ClassifierModule(vocab_size=data.vocab_size, num_classes=2, d_model=16, num_heads=2,
                                  num_layers=layers, dim_feedforward=16, label_names=data.label_names)  # fmt: skip
        maps = AttentionMapLogger(num_examples=1, html=False)
        trainer = L.Trainer(default_root_dir=tmp_path, max_epochs=1, limit_train_batches=1, accelerator="cpu",
                            callbacks=[maps], logger=TensorBoardLogger(tmp_path / str(layers)),
                            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                            num_sanity_val_steps=0, limit_val_batches=1)  # fmt: skip
        trainer.fit(module, datamodule=data)
    one, two = labels[0], labels[-1]
    decompx = "DecompX: blue for positive, orange against"  # first: the signed decomposition (text_method)
    assert one[1:] == ["layer 0 \u00b7 mean of heads"] and one[0] == decompx  # two classes: the second, always
    assert two[1:] == ["layer 0 \u00b7 mean of heads", "layer 1 \u00b7 mean of heads", "rollout through 2 layers"]
    events = {n: EventAccumulator(str(next((tmp_path / str(n)).rglob("events.*")))) for n in (1, 2)}
    tags = {n: e.Reload().Tags()["images"] for n, e in events.items()}
    assert not any(t.endswith("/rollout") for t in tags[1]) and any(t.endswith("/rollout") for t in tags[2])
