"""`AttentionGrid`: the heads of one layer, its labels, titles and colour bar drawn once, then only its cells (as
arrays) and status line at every logged step: what makes logging maps cheap."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.image import AxesImage

from .scales import DEFAULT_SCALE, MAP_KINDS, check_kind, check_scale, scale_note, scaled
from .style import (
    BAR_PX,
    CARD_PX,
    CELL_PX,
    CMAP,
    FONT_PX,
    GAP_PX,
    NORM,
    TITLE_PX,
    Drawn,
    add_axes_first,
    as_numpy,
    colors,
    header_px,
    short_label,
    text_px,
)


def of_text(length: int | None, shown: int) -> int:
    """The text's length, the `uniform` scale's n: `length`, else the `shown` tokens (a window is coloured as the
    whole text is)."""
    if length is not None and length < shown:
        raise ValueError(f"length={length}: a text shown with {shown} tokens has at least {shown}")
    return shown if length is None else length


class AttentionGrid(Drawn):
    """Heatmaps of one text's attention, a panel per map, `ncols` a row (fewer where the card is too narrow), on
    `scale` (`length`: the whole text's, when `tokens` are a window); `draw` gives the figure, `render` pixels."""

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
        fig = self._start(W, H, title, status)
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
            for i, label in enumerate(labels):  # key i under the panel, query i left of the row
                centre = (i + 0.5) * cell
                x, y = (left + centre) / W, 1 - (top + side + 3) / H
                key = fig.text(x, y, label, fontsize=FONT_PX, rotation=90, ha="center", va="top")
                copied += [key] if p else []
                if c == 0:
                    x, y = (left - 3) / W, 1 - (top + centre) / H
                    query = fig.text(x, y, label, fontsize=FONT_PX, ha="right", va="center")
                    copied += [query] if p else []
            self.boxes.append((top, left))
        self._freeze(f"{MAP_KINDS[check_kind(kind)]} \u00b7 {scale_note(scale)}", hidden=copied, copies=copies)

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
            self.images = [
                ax.imshow(blank, cmap=CMAP, norm=NORM, resample=False, interpolation="nearest", aspect="auto")
                for ax in self.axes
            ]
        for image, panel in zip(self.images, self._check(maps), strict=True):
            image.set_data(scaled(panel, self.scale, self.length))
        self._say(status)
        return self.fig

    def render(self, maps: np.ndarray | torch.Tensor, status: str | None = None) -> np.ndarray:
        """The (H, W, 3) uint8 pixels of `draw(maps, status)`: the static frame, each cell written as an array."""
        m = self._check(maps)
        out = self._pixels()
        side = self.cell * self.n
        for (top, left), panel in zip(self.boxes, m, strict=True):
            cells = colors(scaled(panel, self.scale, self.length))  # (n, n, 3)
            out[top : top + side, left : left + side] = cells.repeat(self.cell, axis=0).repeat(self.cell, axis=1)
        return self._stamp(out, status)
