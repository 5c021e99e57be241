"""plotting: the rendered heatmaps show the weights they were given, with the right token labels."""

from __future__ import annotations

import subprocess
import sys

import matplotlib
import numpy as np
import pytest
import torch

from transformer_attention.plotting import (
    CMAP,
    attention_window,
    figure_to_array,
    plot_attention,
    plot_confusion_matrix,
    save_attention_png,
)

TOKENS = ["[CLS]", "the", "plot", "is", "not", "good"]


def hand_built(T: int = 6, peak: tuple[int, int] = (0, 4), seed: int = 0) -> np.ndarray:
    """Rows that sum to 1 with distinct small weights and one large weight at `peak`."""
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.05, 0.5, size=(T, T))
    w[peak] = 3.0
    return w / w.sum(axis=1, keepdims=True)


def decode_cells(fig, ax, image: np.ndarray, n: int, vmax: float) -> np.ndarray:
    """Read the heatmap back from the pixels: the colour at each cell centre mapped to the nearest
    colormap entry, scaled to [0, vmax]. Row 0 of the result is the top row of the picture."""
    lut = matplotlib.colormaps[CMAP](np.linspace(0, 1, 256))[:, :3] * 255  # (256, 3)
    height = image.shape[0]
    values = np.zeros((n, n))
    for q in range(n):
        for k in range(n):
            x, y = ax.transData.transform((k, q))  # display pixels, origin bottom-left
            rgb = image[int(round(height - y)), int(round(x))].astype(float)
            values[q, k] = np.argmin(((lut - rgb) ** 2).sum(axis=1)) / 255 * vmax
    return values


def brightest_cell(fig, ax, image: np.ndarray) -> tuple[int, int]:
    """(query, key) of the brightest pixel inside the axes, located through the axes transform."""
    box = ax.get_window_extent()
    height = image.shape[0]
    top, bottom = int(height - box.y1) + 2, int(height - box.y0) - 2
    left, right = int(box.x0) + 2, int(box.x1) - 2
    crop = image[top:bottom, left:right].astype(float) @ np.array([0.299, 0.587, 0.114])  # luminance
    rows, cols = np.nonzero(crop >= crop.max() - 1.0)  # the brightest patch; its centre, not an edge pixel
    k, q = ax.transData.inverted().transform((left + cols.mean(), height - (top + rows.mean())))
    return int(round(q)), int(round(k))


def test_single_map_pixels_match_weights_and_labels():
    w = hand_built()
    fig = plot_attention(TOKENS, w, title="hand built")
    image = figure_to_array(fig)
    ax = fig.axes[0]
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
    assert brightest_cell(fig, ax, image) == (0, 4)
    np.testing.assert_allclose(decode_cells(fig, ax, image, len(TOKENS), w.max()), w, atol=2 * w.max() / 255)
    assert [t.get_text() for t in ax.get_xticklabels()] == TOKENS  # keys across
    assert [t.get_text() for t in ax.get_yticklabels()] == TOKENS  # queries down, [CLS] on top
    assert ax.get_ylim()[0] > ax.get_ylim()[1]  # row 0 drawn at the top
    assert fig._suptitle.get_text() == "hand built"


def test_head_grid_each_panel_shows_its_head():
    peaks = [(0, 4), (3, 1), (5, 5)]
    w = torch.tensor(np.stack([hand_built(peak=p, seed=i) for i, p in enumerate(peaks)]), dtype=torch.float32)
    fig = plot_attention(TOKENS, w)  # a tensor works as well as an array
    image = figure_to_array(fig)
    heads = [ax for ax in fig.axes if ax.get_title().startswith("head")]
    assert [ax.get_title() for ax in heads] == ["head 0", "head 1", "head 2"]
    vmax = float(w.max())  # one colour scale for all heads
    for h, (ax, peak) in enumerate(zip(heads, peaks, strict=True)):
        assert brightest_cell(fig, ax, image) == peak
        np.testing.assert_allclose(decode_cells(fig, ax, image, 6, vmax), w[h].numpy(), atol=2 * vmax / 255)
        assert [t.get_text() for t in ax.get_xticklabels()] == TOKENS


def test_long_text_cut_to_a_window():
    tokens = ["[CLS]"] + [f"w{i}" for i in range(59)]
    w = np.full((2, 60, 60), 1 / 60)
    fig = plot_attention(tokens, w, "long", max_tokens=10)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == tokens[:10]
    assert "first 10 of 60 tokens" in fig._suptitle.get_text()
    shown, cut = attention_window(tokens, w, 10)
    assert shown == tokens[:10] and cut.shape == (2, 10, 10)


@pytest.mark.parametrize("shape", [(6,), (2, 3, 6, 6), (6, 5)])
def test_bad_shapes_name_the_shape(shape):
    with pytest.raises(ValueError, match=r"\(T, T\) or \(H, T, T\)"):
        plot_attention(TOKENS, np.zeros(shape))


def test_token_count_must_match_unpadded_weights():
    with pytest.raises(ValueError, match="strip padding"):
        plot_attention(TOKENS, np.zeros((8, 8)))


def test_save_png_writes_a_png(tmp_path):
    path = save_attention_png(tmp_path / "maps" / "a.png", TOKENS, hand_built(), "saved")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000


def test_confusion_matrix_annotates_counts():
    fig = plot_confusion_matrix(np.array([[40, 3], [5, 52]]), ["negative", "positive"], "test")
    ax = fig.axes[0]
    assert sorted(t.get_text() for t in ax.texts) == ["3", "40", "5", "52"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["negative", "positive"]
    assert figure_to_array(fig).std() > 0
    with pytest.raises(ValueError, match="3 label names"):
        plot_confusion_matrix(np.zeros((2, 2)), ["a", "b", "c"])


def test_plotting_leaves_pyplot_and_the_backend_alone():
    code = (  # without pyplot, nothing can switch a notebook's backend
        "import sys; from transformer_attention.plotting import plot_attention, figure_to_array; "
        "figure_to_array(plot_attention(['a', 'b'], [[0.5, 0.5], [0.1, 0.9]])); "
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
