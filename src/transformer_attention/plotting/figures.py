"""Figures drawn once and rendered fast: `AttentionGrid` (heads of one layer) and `RolloutBars` (the rollout's
shares) draw their labels, titles and colour bar once with matplotlib; then, for each new set of weights, they
write only the cells (as arrays) and a status line (Pillow, with matplotlib's own font): what makes logging
maps at every logged step cheap. Sizes: style.py; what a colour means (`scale`, stated on the colour bar):
scales.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from .scales import DEFAULT_SCALE, MAP_KINDS, check_kind, check_scale, scale_note, scaled
from .style import (
    BAR_PX,
    CARD_PX,
    CELL_PX,
    CMAP,
    DPI,
    FONT_PX,
    GAP_PX,
    NORM,
    STATUS_COLOUR,
    TITLE_PX,
    Frame,
    add_axes_first,
    as_numpy,
    colors,
    draw_colorbar,
    draw_header,
    header_px,
    short_label,
    text_px,
    write_texts,
)


def of_text(length: int | None, shown: int) -> int:
    """The text's length in tokens, the n of the `uniform` scale: `length`, or the `shown` tokens when not given;
    a window of a longer text is coloured as the whole text's weights are (an even spread is half)."""
    if length is not None and length < shown:
        raise ValueError(f"length={length}: a text shown with {shown} tokens has at least {shown}")
    return shown if length is None else length


class AttentionGrid:
    """Heatmaps of one text's attention: a panel per map (e.g. each head, then their mean), `ncols` per row
    (fewer when they would not fit TensorBoard's image card, `CARD_PX`, at the smallest cell), coloured on
    `scale` (scales.py) with a colour bar at the bottom that says which. The tokens label the keys under every
    panel and the queries left of each row (the panels of a row share them). Sized so that a 12-token text in
    two columns, and up to 24 tokens in one, fit the card at actual size: labels stay 9 px high. `length`: the
    whole text's tokens when `tokens` are a window of it (the `uniform` scale's n, `of_text`).

    `draw(maps)` returns the figure; `render(maps, status)` its pixels, fast: the labels are drawn once and
    each call only writes the cells (as arrays) and the one-line `status` (say, the step and prediction)."""

    def __init__(
        self,
        tokens: Sequence[str],
        panel_titles: Sequence[str],
        title: str | None = None,
        *,
        ncols: int = 2,
        status: bool = False,
        scale: str = DEFAULT_SCALE,
        kind: str = "weight",
        length: int | None = None,
    ) -> None:
        n, P = len(tokens), len(panel_titles)
        if n == 0 or P == 0:
            raise ValueError(f"an attention grid needs tokens and panels, got {n} tokens and {P} panels")
        self.n, self.P, self.scale, self.length = n, P, check_scale(scale), of_text(length, n)
        self.labels = labels = [short_label(t) for t in tokens]
        margin = int(6 + max(text_px(t, FONT_PX) for t in labels))  # room for the token labels

        def budget(cols: int) -> float:  # the cell size at which `cols` panels a row fill the card
            return (CARD_PX - 8 - margin - (cols - 1) * GAP_PX) / (cols * n)

        cols = min(ncols, P)
        while cols > 1 and budget(cols) < 0.95 * CELL_PX[0]:  # fewer columns than an image the card shrinks > 5%
            cols -= 1
        rows = math.ceil(P / cols)
        self.cell = cell = int(min(CELL_PX[1], max(CELL_PX[0], budget(cols))))
        side = cell * n  # a panel is side x side px
        W = 8 + margin + cols * side + (cols - 1) * GAP_PX
        head = header_px(title, W, status)
        row_px = TITLE_PX + 6 + side + margin  # panel title, cells, key labels
        H = head + rows * row_px + BAR_PX
        self.fig = fig = Figure(figsize=(W / DPI, H / DPI), dpi=DPI)
        self.status, self.status_xy = draw_header(fig, title, status)
        self.boxes: list[tuple[int, int]] = []  # (top, left) px of each panel's cells
        self._rects: list[tuple[float, float, float, float]] = []  # panels' axes in figure fractions: by `draw`
        self.axes: list[Axes] = []
        self.images: list[AxesImage] = []
        copied, copies = [], []  # labels the static frame copies from the first panel's pixels, not draws
        for p in range(P):
            r, c = divmod(p, cols)
            left, top = 4 + margin + c * (side + GAP_PX), head + r * row_px + TITLE_PX + 6
            if p:  # the same labels as panel 0's, at a whole number of pixels from them
                top0, left0 = self.boxes[0]
                copies.append(((top0 + side, left0 - 2, margin, side + 4), (top + side, left - 2, margin, side + 4)))
                if c == 0:
                    copies.append(((top0 - 2, 0, side + 4, left0 - 1), (top - 2, 0, side + 4, left - 1)))
            self._rects.append((left / W, 1 - (top + side) / H, side / W, side / H))
            fig.text((left + side / 2) / W, 1 - (top - 3) / H, panel_titles[p], fontsize=TITLE_PX, ha="center")
            for i, label in enumerate(labels):
                centre = (i + 0.5) * cell
                # key i under the panel
                key = fig.text((left + centre) / W, 1 - (top + side + 3) / H, label, fontsize=FONT_PX, rotation=90,
                               ha="center", va="top")  # fmt: skip
                copied += [key] if p else []
                if c == 0:  # query i left of the row
                    query = fig.text((left - 3) / W, 1 - (top + centre) / H, label, fontsize=FONT_PX, ha="right",
                                     va="center")  # fmt: skip
                    copied += [query] if p else []
            self.boxes.append((top, left))
        draw_colorbar(fig, f"{MAP_KINDS[check_kind(kind)]} \u00b7 {scale_note(scale)}")
        hidden = [*([self.status] if self.status is not None else []), *copied]
        self._frame = Frame(fig, hidden=hidden, copies=copies)

    def prepare(self) -> None:
        """Draw the static part now (else the first `render` does)."""
        self._frame.pixels()

    def _check(self, maps: np.ndarray | torch.Tensor) -> np.ndarray:
        m = as_numpy(maps)
        if m.shape != (self.P, self.n, self.n):
            raise ValueError(f"{tuple(m.shape)} maps for a grid of {self.P} panels of {self.n} tokens")
        return m

    def draw(self, maps: np.ndarray | torch.Tensor, status: str | None = None) -> Figure:
        """The figure with `maps` (P, n, n) in its panels (an axes each, made here: `render` never needs them)."""
        if not self.images:
            self.prepare()  # the static frame first: the panels' axes are made for a draw only
            blank = np.zeros((self.n, self.n), dtype=np.float32)
            self.axes = add_axes_first(self.fig, self._rects)
            self.images = [ax.imshow(blank, cmap=CMAP, norm=NORM, resample=False, interpolation="nearest",
                                     aspect="auto") for ax in self.axes]  # fmt: skip
        for image, panel in zip(self.images, self._check(maps), strict=True):
            image.set_data(scaled(panel, self.scale, self.length))
        if self.status is not None:
            self.status.set_text(status or "")
        return self.fig

    def render(self, maps: np.ndarray | torch.Tensor, status: str | None = None) -> np.ndarray:
        """The (H, W, 3) uint8 pixels of the figure with `maps` (P, n, n): the static frame with the cells
        written as arrays (one `colors` block of cell x cell px per weight) and the status line."""
        m = self._check(maps)
        out = self._frame.pixels()
        side = self.cell * self.n
        for (top, left), panel in zip(self.boxes, m, strict=True):
            cells = colors(scaled(panel, self.scale, self.length))  # (n, n, 3)
            out[top : top + side, left : left + side] = cells.repeat(self.cell, axis=0).repeat(self.cell, axis=1)
        if self.status is not None and status:
            write_texts(out, [(self.status_xy, status)], TITLE_PX, STATUS_COLOUR)
        return out


class RolloutBars:
    """Horizontal bars, one per input token (top to bottom in text order): the share of each token in the
    pooled vector the classifier reads (`pooled_rollout`), on a fixed 0-1 axis, coloured on `scale` as the
    maps are (the shares a row, over the whole text's `length` tokens), each with its value. `draw(shares)`
    returns the figure, `render(shares, status)` its pixels (the axes drawn once; bars written as arrays, values
    and status as texts)."""

    ROW_PX = 16

    def __init__(
        self,
        tokens: Sequence[str],
        title: str | None = None,
        *,
        status: bool = False,
        scale: str = DEFAULT_SCALE,
        kind: str = "weight",
        length: int | None = None,
    ) -> None:
        n = len(tokens)
        if n == 0:
            raise ValueError("rollout bars need at least one token")
        self.n, self.scale, self.length = n, check_scale(scale), of_text(length, n)
        self.labels = labels = [short_label(t) for t in tokens]
        margin = int(8 + max(text_px(t, FONT_PX) for t in labels))
        W = CARD_PX
        head = header_px(title, W, status)
        self.height = n * self.ROW_PX
        self.width = W - margin - 46  # room for the values right of the bars
        self.top, self.left = head + 8, margin
        H = self.top + self.height + 24 + BAR_PX  # 24: the 0-1 axis under the bars
        self.fig = fig = Figure(figsize=(W / DPI, H / DPI), dpi=DPI)
        self.status, self.status_xy = draw_header(fig, title, status)
        self._rect = (margin / W, 1 - (self.top + self.height) / H, self.width / W, self.height / H)
        for i, label in enumerate(labels):  # token labels as plain texts: no tick machinery
            y = self.top + (i + 0.5) * self.ROW_PX
            fig.text((margin - 4) / W, 1 - y / H, label, fontsize=FONT_PX, ha="right", va="center")
        bottom = 1 - (self.top + self.height) / H
        for value in (0.0, 0.25, 0.5, 0.75, 1.0):
            x = (margin + value * self.width) / W
            colour = "black" if value == 0 else "#dddddd"
            fig.add_artist(Line2D([x, x], [bottom, 1 - self.top / H], color=colour, linewidth=0.8, zorder=0))
            fig.text(x, bottom - 3 / H, f"{value:.2f}", fontsize=FONT_PX - 1, ha="center", va="top")
        fig.add_artist(Line2D([margin / W, (margin + self.width) / W], [bottom, bottom], color="black", linewidth=0.8))
        self.ax: Axes | None = None  # the bars' axes, made by the first `draw`
        self.bars: list[Rectangle] = []
        self.values: list[Text] = []
        of = "" if check_kind(kind) == "weight" else f" (from {MAP_KINDS[kind]})"
        draw_colorbar(fig, f"share of the pooled vector{of} (bar: 0 to 1) \u00b7 colour: {scale_note(scale)}")
        self._frame = Frame(fig, hidden=[self.status] if self.status is not None else [])

    def prepare(self) -> None:
        """Draw the static part now (else the first `render` does)."""
        self._frame.pixels()

    def _check(self, shares: np.ndarray | torch.Tensor) -> np.ndarray:
        s = as_numpy(shares)
        if s.shape != (self.n,):
            raise ValueError(f"{tuple(s.shape)} shares for {self.n} tokens")
        return s

    def draw(self, shares: np.ndarray | torch.Tensor, status: str | None = None) -> Figure:
        """The figure with a bar and its value per share (their axes made here: `render` never needs them)."""
        s = self._check(shares)
        if self.ax is None:
            self.prepare()  # the static frame first: the bars' axes are made for a draw only
            (self.ax,) = (ax,) = add_axes_first(self.fig, [self._rect])
            ax.set(xlim=(0, 1), ylim=(self.n - 0.5, -0.5))  # the first token on top
            self.bars = list(ax.barh(range(self.n), np.zeros(self.n), height=0.75, color=colormaps[CMAP](0.0)))
            self.values = [ax.text(0, i, "", va="center", ha="left", fontsize=FONT_PX - 1) for i in range(self.n)]
        shades = colors(scaled(s, self.scale, self.length))
        for bar, text, value, colour in zip(self.bars, self.values, s, shades, strict=True):
            bar.set_width(float(value))
            bar.set_color(colour / 255)
            text.set_x(float(value) + 0.01)
            text.set_text(f"{value:.2f}")
        if self.status is not None:
            self.status.set_text(status or "")
        return self.fig

    def render(self, shares: np.ndarray | torch.Tensor, status: str | None = None) -> np.ndarray:
        s = self._check(shares)
        out = self._frame.pixels()
        pad = round(self.ROW_PX * 0.125)  # bars are 0.75 of a row high
        values = []
        for i, (value, colour) in enumerate(zip(s, colors(scaled(s, self.scale, self.length)), strict=True)):
            length = int(round(float(np.clip(value, 0, 1)) * self.width))
            top = self.top + i * self.ROW_PX
            out[top + pad : top + self.ROW_PX - pad, self.left : self.left + length] = colour
            values.append(((self.left + length + 3, top + (self.ROW_PX - FONT_PX) / 2 - 1), f"{value:.2f}"))
        write_texts(out, values, FONT_PX - 1, "black")
        if self.status is not None and status:
            write_texts(out, [(self.status_xy, status)], TITLE_PX, STATUS_COLOUR)
        return out
