"""plotting: the rendered heatmaps show the weights they were given, with the right token labels."""

from __future__ import annotations

import subprocess
import sys

import matplotlib
import numpy as np
import pytest
import torch

from transformer_attention.plotting import (
    POOLED_ROW,
    AttentionGrid,
    ReviewText,
    RolloutBars,
    attention_window,
    figure_to_array,
    key_window,
    paragraphs,
    plot_attention,
    plot_confusion_matrix,
    plot_rollout,
    save_attention_png,
    scaled,
    window_labels,
)
from transformer_attention.plotting import text as text_view
from transformer_attention.plotting.style import CARD_PX, CMAP, colors, font

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


def titles(fig) -> list[str]:
    """The figure's title lines and status (left-aligned texts at the top)."""
    return [t.get_text() for t in fig.texts if t.get_ha() == "left" and t.get_text()]


def panel_titles(fig) -> list[str]:
    """Centred texts that are not the colour bar's ticks and label (the bottom strip)."""
    return [
        t.get_text()
        for t in fig.texts
        if t.get_ha() == "center" and t.get_rotation() == 0 and t.get_position()[1] * fig.bbox.height > 50
    ]


def key_labels(fig, ax) -> list[str]:
    """The labels under `ax` (rotated texts within its width), left to right."""
    box = ax.get_position()
    under = [t for t in fig.texts if t.get_rotation() == 90 and box.x0 <= t.get_position()[0] <= box.x1]
    top = max(t.get_position()[1] for t in under if t.get_position()[1] < box.y0)  # the row right under ax
    under = [t for t in under if t.get_position()[1] == top]
    return [t.get_text() for t in sorted(under, key=lambda t: t.get_position()[0])]


def query_labels(fig, ax) -> list[str]:
    """The labels left of `ax`'s row (right-aligned texts within its height), top to bottom."""
    y0, y1 = ax.get_position().y0, ax.get_position().y1
    left = [t for t in fig.texts if t.get_ha() == "right" and y0 <= t.get_position()[1] <= y1]
    return [t.get_text() for t in sorted(left, key=lambda t: -t.get_position()[1])]


def test_single_map_pixels_match_weights_and_labels():
    w = hand_built()
    fig = plot_attention(TOKENS, w, title="hand built", scale="fixed")
    image = figure_to_array(fig)
    ax = fig.axes[0]
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
    assert brightest_cell(fig, ax, image) == (0, 4)
    np.testing.assert_allclose(decode_cells(fig, ax, image, len(TOKENS), 1.0), w, atol=2 / 255)  # the 0-1 scale
    for scale in ("row", "uniform"):  # the default, uniform: w·n / (w·n + 1), so 1/n is drawn at half
        fig = plot_attention(TOKENS, w, title="hand built", scale=scale)
        decoded = decode_cells(fig, fig.axes[0], figure_to_array(fig), len(TOKENS), 1.0)
        np.testing.assert_allclose(decoded, scaled(w, scale), atol=2 / 255)
    assert "uniform scale" in " ".join(t.get_text() for t in plot_attention(TOKENS, w).texts)
    assert key_labels(fig, ax) == TOKENS  # keys across
    assert query_labels(fig, ax) == TOKENS  # queries down, [CLS] on top
    assert ax.get_ylim()[0] > ax.get_ylim()[1]  # row 0 drawn at the top
    assert titles(fig) == ["hand built"]


def test_head_grid_each_panel_shows_its_head():
    peaks = [(0, 4), (3, 1), (5, 5)]
    w = torch.tensor(np.stack([hand_built(peak=p, seed=i) for i, p in enumerate(peaks)]), dtype=torch.float32)
    fig = plot_attention(TOKENS, w, scale="fixed")  # a tensor works as well as an array
    image = figure_to_array(fig)
    heads = fig.axes[:3]  # then the colour bar
    assert panel_titles(fig) == ["head 0", "head 1", "head 2"]
    for h, (ax, peak) in enumerate(zip(heads, peaks, strict=True)):
        assert brightest_cell(fig, ax, image) == peak
        np.testing.assert_allclose(decode_cells(fig, ax, image, 6, 1.0), w[h].numpy(), atol=2 / 255)
        assert key_labels(fig, ax) == TOKENS


def test_long_text_shows_the_keys_the_pooled_row_reads_most():
    tokens = ["[CLS]"] + [f"w{i}" for i in range(59)]
    w = np.full((2, 60, 60), 1 / 60)
    w[:, 0, 50] = w[:, 0, 20] = 0.3  # the [CLS] row reads w49 and w19 most: the review's end, not its start
    fig = plot_attention(tokens, w, "long", max_tokens=7)
    ax = fig.axes[0]
    assert key_labels(fig, ax) == ["[CLS]", "\u2026w18", "w19", "w20", "\u2026w48", "w49", "w50"]  # gaps marked
    assert "7 of 60 tokens: those the [CLS] row reads most" in " ".join(titles(fig))
    mean = plot_attention(tokens, w, "long", max_tokens=7, pooling="mean")  # the mean of the rows: as even
    assert key_labels(mean, mean.axes[0])[0] == "[CLS]" and "the mean of the rows" in " ".join(titles(mean))
    shown, cut = attention_window(tokens, w, 10)  # the interactive page's cut: the first tokens
    assert shown == tokens[:10] and cut.shape == (2, 10, 10)


def test_key_window_fits_and_keeps_neighbours():
    shares = np.zeros(100)
    shares[[10, 90, 91]] = [0.5, 0.3, 0.2]
    assert key_window(shares, 8) == [0, 9, 10, 11, 89, 90, 91, 92]
    assert key_window(shares[:5], 8) == [0, 1, 2, 3, 4]  # all of a short text
    assert key_window(shares, 2) == [0, 10]  # the top key alone when its neighbours do not fit
    assert window_labels(["a", "b", "c", "d"], [0, 2, 3]) == ["a", "\u2026c", "d"]


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


def luminance(image: np.ndarray) -> float:
    return float((image.astype(float) @ np.array([0.299, 0.587, 0.114])).mean())


def test_one_colour_scale_everywhere():
    """On the fixed scale a map whose largest weight is 0.3 is drawn darker than one reaching 1.0: 0 to 1, not to
    each maximum; every scale's colour bar runs through the same colours and names its scale."""
    low = np.full((6, 6), 0.05)
    low[:, 2] = 0.3
    high = np.zeros((6, 6))
    high[:, 2] = 1.0
    cells = []
    for w in (low, high):
        fig = plot_attention(TOKENS, w, scale="fixed")
        image, ax = figure_to_array(fig), fig.axes[0]
        assert "fixed scale: colour = weight, 0 to 1" in " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
        x, y = ax.transData.transform((2, 3))
        cells.append(image[int(round(image.shape[0] - y)), int(round(x))])
        ticks = [t.get_text() for t in fig.texts if t.get_position()[1] * fig.bbox.height < 50][:5]
        assert ticks == ["0.00", "0.25", "0.50", "0.75", "1.00"]  # the colour bar's, under it
        row = image[-50]  # a row through the colour bar: runs from colors(0) to colors(1)
        bar = row[(np.abs(row.astype(int) - 255).sum(axis=1) > 30)]
        np.testing.assert_array_equal(bar[0], colors(np.array([0.0]))[0])
        np.testing.assert_array_equal(bar[-1], colors(np.array([1.0]))[0])
    assert luminance(cells[0][None]) < luminance(cells[1][None]) - 50
    np.testing.assert_array_equal(cells[0], colors(np.array([0.3]))[0])
    np.testing.assert_array_equal(cells[1], colors(np.array([1.0]))[0])


TWELVE = ["[CLS]", "the", "plot", "is", "not", "good", "but", "the", "acting", "is", "disappointing", "overall"]


def test_grid_render_equals_a_full_draw_and_fits_a_card():
    """The fast path (labels drawn once, cells written as arrays) gives the pixels of a full draw; a
    12-token text with 4 heads and their mean fits TensorBoard's card width; no title runs off the image."""
    rng = np.random.default_rng(0)
    maps = rng.dirichlet(np.ones(12), size=(5, 12)).astype(np.float32)  # (5, 12, 12), rows sum to 1
    title = "example_0 \u00b7 true: negative \u00b7 " + " ".join(TWELVE) * 2  # long: wraps, never cut
    grid = AttentionGrid(TWELVE, [f"head {h}" for h in range(4)] + ["mean"], title, status=True)
    first = grid.render(maps)
    assert len(grid.fig.axes) == 1  # the colour bar's: the panels' axes are made by a draw, never for a render
    np.testing.assert_array_equal(first, figure_to_array(grid.draw(maps)))
    assert grid.fig.axes[:5] == grid.axes and len(grid.fig.axes) == 6  # the panels first, then the colour bar
    for m in (maps, maps[::-1], maps * 0.5):
        np.testing.assert_array_equal(grid.render(m), figure_to_array(grid.draw(m)))
    fast = grid.render(maps, "layer 0 \u00b7 step 7")  # the status line is written into its band only
    changed = np.nonzero((fast != grid.render(maps)).any(axis=(1, 2)))[0]
    top = grid.status_xy[1]
    assert len(changed) and top <= changed.min() and changed.max() < top + 16
    assert fast.shape[1] <= CARD_PX + 15
    renderer = grid.fig.canvas.get_renderer()
    for text in grid.fig.texts:
        box = text.get_window_extent(renderer)
        assert box.x0 >= 0 and box.x1 <= fast.shape[1] and box.y1 <= fast.shape[0], text.get_text()


@pytest.mark.parametrize("tokens", [["[CLS]", "great", "was", "movie"], ["[CLS]", "WWWW", "mmmmm", "ok"]])
def test_wide_labels_are_copied_whole_into_every_panel(tokens):
    """Labels with wide letters get the room they take: the copies of panel 0's labels hold all their pixels."""
    rng = np.random.default_rng(3)
    maps = rng.dirichlet(np.ones(len(tokens)), size=(4, len(tokens))).astype(np.float32)
    grid = AttentionGrid(tokens, [f"head {h}" for h in range(4)], "wide", status=True)
    np.testing.assert_array_equal(grid.render(maps), figure_to_array(grid.draw(maps)))


WORDS = (
    "the a plot acting is not good but bad wonderful film WWII movie boring great overall disappointing it was"
).split()


@pytest.mark.parametrize("seed", range(16))
def test_render_equals_a_full_draw_for_any_tokens_and_panels(seed):
    """Seeded random texts (1 to 24 tokens, wide and narrow words) and 1 to 5 panels: the fast path's pixels,
    labels copied from panel 0 included, are those of a full draw."""
    rng = np.random.default_rng(seed)
    n, panels = int(rng.integers(1, 25)), int(rng.integers(1, 6))
    tokens = ["[CLS]", *rng.choice(WORDS, n - 1)]
    maps = rng.dirichlet(np.ones(n), size=(panels, n)).astype(np.float32)
    grid = AttentionGrid(tokens, [f"head {h}" for h in range(panels)], f"seed {seed}", status=True)
    np.testing.assert_array_equal(grid.render(maps), figure_to_array(grid.draw(maps)))


def test_rollout_bars_show_the_shares():
    shares = np.array([0.5, 0.1, 0.3, 0.1], dtype=np.float32)
    bars = RolloutBars(["[CLS]", "not", "good", "."], "rollout", status=True)
    fast = bars.render(shares)
    full = figure_to_array(bars.draw(shares))
    bar_area = (slice(bars.top, bars.top + bars.height), slice(bars.left + 1, bars.left + bars.width - 1))
    differ = np.abs(fast[bar_area].astype(int) - full[bar_area].astype(int)).max(axis=2) > 40
    assert differ.mean() < 0.08  # the same bars; edges and the value texts (another font renderer) differ a little
    assert [t.get_text() for t in bars.values] == ["0.5", "0.1", "0.3", "0.1"]
    widths = [b.get_width() for b in bars.bars]
    assert widths == pytest.approx(shares.tolist())


def test_a_long_texts_rollout_bars_fit_its_shares():
    """Near-even shares of a 1,024-token text (about 0.001 each) on an axis of 0.01, not 0-1, each value to 3
    significant digits (none reads "0.00"); a share past the axis is cut there and marked."""
    from transformer_attention.plotting.bars import axis_top

    assert [axis_top(n) for n in (4, 10, 24, 100, 1024)] == [1.0, 1.0, 0.5, 0.1, 0.01]
    shares = np.array([0.3, 0.00123, 0.0009, 0.002], dtype=np.float64)
    bars = RolloutBars(["[CLS]", "not", "good", "."], "rollout", length=1024)
    bars.draw(shares)
    assert [t.get_text() for t in bars.values] == ["0.3 \u25b8", "0.00123", "0.0009", "0.002"]
    assert [b.get_width() for b in bars.bars] == pytest.approx([0.01, 0.00123, 0.0009, 0.002])
    fast = bars.render(shares)
    row = fast[bars.top + bars.ROW_PX // 2, bars.left : bars.left + bars.width]  # the first bar: the whole axis
    assert (np.abs(row.astype(int) - row[0].astype(int)).max(axis=1) < 10).all()
    fig = plot_rollout(["[CLS]", "a", "b"], [np.eye(3)[None], np.eye(3)[None]], "identity")
    assert [round(b.get_width(), 6) for b in fig.axes[0].patches] == [1.0, 0.0, 0.0]  # [CLS] reads only itself


def test_the_mean_panel_is_the_heads_mean_and_left_out_for_one_head():
    two = np.stack([hand_built(peak=(0, 4)), hand_built(peak=(0, 1), seed=1)])  # (2, T, T)
    fig = plot_attention(TOKENS, two, mean=True, scale="fixed")
    panels = [ax.images[0].get_array() for ax in fig.axes if ax.images][:-1]  # the last image: the colour bar
    assert len(panels) == 3
    np.testing.assert_allclose(panels[2], two.mean(axis=0), atol=1e-6)
    one = plot_attention(TOKENS, two[:1], mean=True)  # a mean of one head would repeat it
    assert len([ax for ax in one.axes if ax.images]) == 2


def word_box_colours(view: ReviewText, pixels: np.ndarray, paragraph: int) -> np.ndarray:
    """The colour of each word's box in `paragraph`, read at its top-left inner corner (no letter there)."""
    top = view.head + paragraph * view.block + text_view.LABEL_PX
    return np.array([pixels[top + line * text_view.LINE_PX + 1, x + 1] for x, line, _ in view.boxes])


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_text_view_shades_each_word_by_the_pooled_row(pooling):
    """[CLS] pooling shades by the [CLS] row, mean pooling by the mean of the rows, and the colour bar says which;
    word pieces are joined into one word whose weight is the mean of its pieces' (as on the page), and [CLS] is
    no word of the review: not shaded, its share in the paragraph's label."""
    tokens = ["[CLS]", "the", "act", "##ing", "is", "not", "wonder", "##ful"]
    rng = np.random.default_rng(1)
    layer = rng.dirichlet(np.ones(8) * 0.5, size=(2, 8))  # (H, T, T), rows sum to 1
    rows, labels = paragraphs([layer], pooling)  # layer 0's pooled row (mean of heads), then the rollout
    assert labels == ["layer 0 \u00b7 mean of heads", "rollout through 1 layer"]
    expected_row = layer.mean(axis=0)[0] if pooling == "cls" else layer.mean(axis=0).mean(axis=0)
    np.testing.assert_allclose(rows[0], expected_row, atol=1e-6)
    view = ReviewText(tokens, len(rows), "a review", pooling=pooling, scale="fixed")
    assert [w.text for w in view.words] == ["[CLS]", "the", "acting", "is", "not", "wonderful"]
    assert len(view.boxes) == 5  # a box per word of the review
    pixels = view.render(rows, labels)
    assert pixels.shape[1] <= CARD_PX  # shown at actual size in TensorBoard's card
    e = expected_row
    means = np.array([e[1], e[2:4].mean(), e[4], e[5], e[6:].mean()])  # acting, wonderful: two pieces each
    np.testing.assert_array_equal(word_box_colours(view, pixels, 0), colors(means))
    said = " ".join(t.get_text() for t in view.fig.texts).replace("\n", " ")
    assert POOLED_ROW[pooling] in said and "the mean of its weights" in said and "fixed scale" in said
    other = "mean" if pooling == "cls" else "cls"
    assert POOLED_ROW[other] not in said


def test_a_signed_paragraph_carries_the_scale_of_its_colours(monkeypatch):
    """A signed paragraph (an attribution) draws its scale beside its label: orange at minus the text's largest
    size, white at 0, blue at plus it, the ends written; an attention paragraph's label states [CLS]'s share."""
    tokens = ["[CLS]", "a", "good", "film"]
    rows = np.array([[9.0, 0.5, -2.0, 1.0], [0.4, 0.1, 0.2, 0.3]])  # the attribution's [CLS] value is no word's
    view = ReviewText(tokens, 2, "t", signed=1)
    pixels = view.render(rows, ["DecompX: blue for positive, orange against", "layer 0 \u00b7 mean of heads"])
    label_line = pixels[view.head + 4 : view.head + text_view.TITLE_PX + 2]  # (rows, W, 3)
    seen = {tuple(int(c) for c in px) for px in label_line.reshape(-1, 3)}
    assert tuple(text_view.FOR) in seen and tuple(text_view.AGAINST) in seen  # both ends of the scale
    _, values = view.word_colours(rows)
    assert values[0].tolist() == [0.25, -1.0, 0.5]  # sized by the largest word, [CLS] left out
    drawn, write = [], text_view.ImageDraw.ImageDraw.text
    monkeypatch.setattr(
        text_view.ImageDraw.ImageDraw, "text", lambda d, xy, t, **kw: drawn.append(t) or write(d, xy, t, **kw)
    )
    view.render(rows, ["DecompX", "layer 0 \u00b7 mean of heads"])
    assert "\u22122" in drawn and "+2" in drawn  # the scale's ends: the largest size, 2
    assert "layer 0 \u00b7 mean of heads \u00b7 [CLS] itself 0.4" in drawn


def test_text_view_holds_a_whole_imdb_review_legibly():
    """512 tokens wrap into the card's width; every word gets a box inside the image; the words are 12 px text
    with capitals 9 px high at the card's scale (1: the image is no wider than the card)."""
    rng = np.random.default_rng(0)
    tokens = ["[CLS]"] + [str(rng.choice(["a", "film", "wonder", "##ful", "not", "terribly", "."])) for _ in range(511)]
    rows = rng.dirichlet(np.ones(512), size=2)
    view = ReviewText(tokens, 2, "long", pooling="mean")
    pixels = view.render(rows, ["layer 0", "rollout"])
    assert pixels.shape[1] == CARD_PX and all(x + w <= CARD_PX for x, _, w in view.boxes)
    assert view.head + 2 * view.block <= pixels.shape[0]  # every line of both paragraphs, above the colour bar
    left, top, right, bottom = font(text_view.TEXT_PX).getbbox("H")
    assert bottom - top >= 8  # capital letters' height in px, at the card's width


def test_grid_of_18_tokens_fits_the_card_in_one_column():
    """Two columns of an 18-token text would be shrunk by the card: one column keeps 11 px cells, 9 px labels."""
    tokens = ["[CLS]"] + [f"word{i}" for i in range(17)]
    grid = AttentionGrid(tokens, [f"head {h}" for h in range(4)] + ["mean"], "t")
    pixels = grid.render(np.full((5, 18, 18), 1 / 18))
    assert pixels.shape[1] <= CARD_PX and grid.cell >= 11
