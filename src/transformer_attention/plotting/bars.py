"""`RolloutBars`: each token's share in the pooled vector by attention rollout, drawn as the grids are."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from .figures import of_text
from .scales import DEFAULT_SCALE, MAP_KINDS, check_kind, check_scale, scale_note, scaled
from .style import (
    BAR_PX,
    CARD_PX,
    CMAP,
    FONT_PX,
    Drawn,
    add_axes_first,
    as_numpy,
    colors,
    header_px,
    short_label,
    text_px,
    write_texts,
)


class RolloutBars(Drawn):
    """A bar per token, in text order, of its share in the pooled vector (`pooled_rollout`), coloured on `scale` as
    the maps are, with its value to 3 significant digits, on an axis that fits the text's `length` (`axis_top`: a
    long text's shares are near 1/length), a dashed line at the even share 1/length; a bar past the axis ends in a
    mark. `draw(shares)` returns the figure, `render(shares, status)` its pixels, fast."""

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
        self.axis = axis_top(self.length)
        self.labels = labels = [short_label(t) for t in tokens]
        margin = int(8 + max(text_px(t, FONT_PX) for t in labels))
        W = CARD_PX
        head = header_px(title, W, status)
        self.height = n * self.ROW_PX
        self.width = W - margin - 52  # room for the values right of the bars
        self.top, self.left = head + 8, margin
        H = self.top + self.height + 24 + BAR_PX  # 24: the axis under the bars
        fig = self._start(W, H, title, status)
        self._rect = (margin / W, 1 - (self.top + self.height) / H, self.width / W, self.height / H)
        for i, label in enumerate(labels):  # token labels as plain texts: no tick machinery
            y = self.top + (i + 0.5) * self.ROW_PX
            fig.text((margin - 4) / W, 1 - y / H, label, fontsize=FONT_PX, ha="right", va="center")
        bottom = 1 - (self.top + self.height) / H
        for value in np.linspace(0, self.axis, 5):
            x = (margin + value / self.axis * self.width) / W
            colour = "black" if value == 0 else "#dddddd"
            fig.add_artist(Line2D([x, x], [bottom, 1 - self.top / H], color=colour, linewidth=0.8, zorder=0))
            fig.text(x, bottom - 3 / H, f"{value:.3g}", fontsize=FONT_PX - 1, ha="center", va="top")
        even = (margin + min(1.0, 1 / self.length / self.axis) * self.width) / W  # the even share, 1/length
        fig.add_artist(Line2D([even, even], [bottom, 1 - self.top / H], color="#888888", linewidth=0.8, ls="--"))
        fig.add_artist(Line2D([margin / W, (margin + self.width) / W], [bottom, bottom], color="black", linewidth=0.8))
        self.ax: Axes | None = None  # the bars' axes, made by the first `draw`
        self.bars: list[Rectangle] = []
        self.values: list[Text] = []
        of = "" if check_kind(kind) == "weight" else f" (from {MAP_KINDS[kind]})"
        bar = f"bar: 0 to {self.axis:g}, dashed: 1/{self.length}, an even share"
        self._freeze(f"share of the pooled vector{of} ({bar}) \u00b7 colour: {scale_note(scale)}")

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
            ax.set(xlim=(0, self.axis), ylim=(self.n - 0.5, -0.5))  # the first token on top
            self.bars = list(ax.barh(range(self.n), np.zeros(self.n), height=0.75, color=colormaps[CMAP](0.0)))
            self.values = [ax.text(0, i, "", va="center", ha="left", fontsize=FONT_PX - 1) for i in range(self.n)]
        shades = colors(scaled(s, self.scale, self.length))
        for bar, text, value, colour in zip(self.bars, self.values, s, shades, strict=True):
            bar.set_width(min(float(value), self.axis))
            bar.set_color(colour / 255)
            text.set_x(min(float(value), self.axis) + 0.01 * self.axis)
            text.set_text(_value(float(value), self.axis))
        self._say(status)
        return self.fig

    def render(self, shares: np.ndarray | torch.Tensor, status: str | None = None) -> np.ndarray:
        s = self._check(shares)
        out = self._pixels()
        pad = round(self.ROW_PX * 0.125)  # bars are 0.75 of a row high
        values = []
        for i, (value, colour) in enumerate(zip(s, colors(scaled(s, self.scale, self.length)), strict=True)):
            length = int(round(float(np.clip(value / self.axis, 0, 1)) * self.width))
            top = self.top + i * self.ROW_PX
            out[top + pad : top + self.ROW_PX - pad, self.left : self.left + length] = colour
            text = _value(float(value), self.axis)
            values.append(((self.left + length + 3, top + (self.ROW_PX - FONT_PX) / 2 - 1), text))
        write_texts(out, values, FONT_PX - 1, "black")
        return self._stamp(out, status)


AXIS_TOPS = (1.0, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001)


def axis_top(length: int) -> float:
    """The bars' axis for a text of `length` tokens: the smallest of AXIS_TOPS at or above 10 even shares (10 /
    length), so a long text's bars are not all a pixel long; 1 for a text of 10 tokens or fewer."""
    return min((t for t in AXIS_TOPS if t >= min(1.0, 10 / max(1, length))), default=1.0)


def _value(value: float, axis: float) -> str:
    """A share as its bar's label: 3 significant digits (1/500 is 0.002, not 0.00), a mark past the axis."""
    return f"{value:.3g}" + (" \u25b8" if value > axis else "")
