"""What every attention image shares: the one 0-1 colour scale (`NORM`, `colors`), sizes in pixels (DPI 72: 1 pt =
1 px) for TensorBoard's image card (`CARD_PX` wide), and `Drawn`, what the fast figures are made of: a static part
drawn once with matplotlib (no pyplot), and text written with Pillow in matplotlib's own font."""

from __future__ import annotations

import functools
import textwrap
from collections.abc import Sequence

import numpy as np
import torch
from matplotlib import colormaps, font_manager
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Text
from numpy.typing import ArrayLike
from PIL import Image, ImageDraw, ImageFont

CMAP = "viridis"  # perceptually uniform, brightness rises with the value
MAX_TOKENS = 40  # longer texts are cut to their first MAX_TOKENS tokens: labels stay readable
DPI = 72  # 1 pt = 1 px, so the sizes below are pixels
CARD_PX = 350  # an image card in TensorBoard's IMAGES tab (1600 px window); wider images are shrunk to it
FONT_PX = 9  # tick labels (tokens)
TITLE_PX = 10
LABEL_CHARS = 14  # longer tokens are shortened to this many characters on the axes
CELL_PX = (11, 24)  # smallest and largest cell of a heatmap
GAP_PX = 10
NORM = Normalize(vmin=0.0, vmax=1.0)  # the one colour scale of every attention image
Rect = tuple[float, float, float, float]  # an axes' (left, bottom, width, height), in fractions of its figure


def as_numpy(weights: ArrayLike | torch.Tensor) -> np.ndarray:
    """`weights` (a tensor, array or nested lists) as a float32 NumPy array, on the CPU."""
    if isinstance(weights, torch.Tensor):
        weights = weights.detach().float().cpu().numpy()
    return np.asarray(weights, dtype=np.float32)


def short_label(token: str) -> str:
    return token if len(token) <= LABEL_CHARS else token[: LABEL_CHARS - 1] + "\u2026"


def text_px(text: str, size: int) -> float:
    """A generous width of `text` in DejaVu Sans at `size` px (no renderer needed): 0.56 em a character, or the
    font's own advance (Pillow's) plus a pixel where wide letters ("movie", "WWW") need more."""
    return max(0.56 * size * len(text), font(size).getlength(text) + 1)


def add_axes_first(fig: Figure, rects: Sequence[Rect]) -> list[Axes]:
    """Axes at `rects` (figure fractions), without axis (labels and ticks are plain texts: no tick machinery), put
    before the axes `fig` has (its colour bar's): a figure's panels are its first axes, whenever they are made."""
    earlier = list(fig.axes)
    for ax in earlier:
        fig.delaxes(ax)
    made = [fig.add_axes(rect) for rect in rects]
    for ax in made:
        ax.set_axis_off()
    for ax in earlier:
        fig.add_axes(ax)
    return made


@functools.lru_cache(maxsize=4)
def font(size: int) -> ImageFont.FreeTypeFont:
    """matplotlib's own DejaVu Sans for Pillow, which writes a line of text in a fraction of a millisecond."""
    return ImageFont.truetype(font_manager.findfont(font_manager.FontProperties(family="DejaVu Sans")), size)


def write_texts(pixels: np.ndarray, texts: Sequence[tuple[tuple[float, float], str]], size: int, fill: str) -> None:
    """Write each `((x, y) px of its top-left corner, text)` into the (H, W, 3) `pixels`, in place."""
    top = max(0, int(min(y for (_, y), _ in texts)))
    bottom = min(len(pixels), int(max(y for (_, y), _ in texts) + 2 * size))
    band = Image.fromarray(pixels[top:bottom])
    draw = ImageDraw.Draw(band)
    for (x, y), text in texts:
        draw.text((x, y - top), text, font=font(size), fill=fill)
    pixels[top:bottom] = np.asarray(band)


def title_lines(title: str | None, width_px: float) -> list[str]:
    return textwrap.wrap(title or "", width=max(10, int((width_px - 8) / (0.56 * TITLE_PX))))


def header_px(title: str | None, width_px: float, status: bool) -> int:
    return 6 + len(title_lines(title, width_px)) * (TITLE_PX + 3) + (TITLE_PX + 4 if status else 0)


STATUS_COLOUR = "#444444"


def draw_header(fig: Figure, title: str | None, status: bool) -> tuple[Text | None, tuple[int, int]]:
    """Title lines (wrapped to the width, never cut off) and, with `status`, a one-line text below them that
    may change from image to image; returns that Text (None without) and its top-left corner in px."""
    W, H = fig.get_figwidth() * DPI, fig.get_figheight() * DPI
    lines = title_lines(title, W)
    if lines:
        fig.text(4 / W, 1 - 4 / H, "\n".join(lines), fontsize=TITLE_PX, va="top", ha="left", linespacing=1.3)
    top = 6 + len(lines) * (TITLE_PX + 3)
    if not status:
        return None, (4, top)
    return fig.text(4 / W, 1 - top / H, "", fontsize=TITLE_PX, va="top", ha="left", color=STATUS_COLOUR), (4, top)


BAR_PX = 68  # the colour bar strip at the bottom of every attention image (its label in up to three lines)


def draw_colorbar(fig: Figure, label: str) -> None:
    """A 0-1 colour bar in the strip at the bottom of `fig` (ticks as plain lines and texts) over `label`, what a
    colour means, in three lines at most."""
    W, H = fig.get_figwidth() * DPI, fig.get_figheight() * DPI
    left, width, top = int(0.1 * W), int(0.8 * W), int(H) - 55  # bar: 9 px high, its top 55 px above the bottom
    bar = fig.add_axes((left / W, 1 - (top + 9) / H, width / W, 9 / H))  # scales with the figure's dpi
    bar.imshow(colors(np.linspace(0.0, 1.0, width))[None], aspect="auto", interpolation="nearest")  # (1, width, 3)
    bar.set_axis_off()
    for value in (0.0, 0.25, 0.5, 0.75, 1.0):
        x = (left + value * (width - 1) + 0.5) / W
        fig.add_artist(Line2D([x, x], [1 - (top + 9) / H, 1 - (top + 11) / H], color="black", linewidth=0.8))
        fig.text(x, 1 - (top + 12) / H, f"{value:.2f}", fontsize=FONT_PX - 1, ha="center", va="top")
    lines = textwrap.wrap(label, width=max(10, int((W - 8) / (0.56 * FONT_PX))))[:3]
    fig.text(0.5, 1 - (top + 22) / H, "\n".join(lines), fontsize=FONT_PX, ha="center", va="top", linespacing=1.2)


@functools.lru_cache(maxsize=1)
def colour_table() -> np.ndarray:
    return colormaps[CMAP](np.linspace(0.0, 1.0, colormaps[CMAP].N), bytes=True)[:, :3]  # (N, 3) uint8


def colors(values: np.ndarray) -> np.ndarray:
    """RGB uint8 colours of `values` on the one attention scale (0 to 1, clipped), exactly as imshow draws them."""
    lut = colour_table()
    index = (np.asarray(values, dtype=np.float32) * len(lut)).astype(np.int64)
    return lut[np.clip(index, 0, len(lut) - 1)]


class Drawn:
    """A figure whose static part is drawn once (`prepare`, else the first render), without the artists that
    change from image to image, such as the status line under its title: `_start` makes the figure and header,
    `_freeze` its colour bar once all that is static is drawn, `_pixels` a copy of its pixels to write into."""

    fig: Figure
    status: Text | None
    status_xy: tuple[int, int]

    def _start(self, width: float, height: float, title: str | None, status: bool) -> Figure:
        self.fig = Figure(figsize=(width / DPI, height / DPI), dpi=DPI)
        self._canvas = FigureCanvasAgg(self.fig)  # drawing works without pyplot
        self.status, self.status_xy = draw_header(self.fig, title, status)
        return self.fig

    def _freeze(self, label: str, hidden: Sequence = (), copies: Sequence[tuple[tuple, tuple]] = ()) -> None:
        """The colour bar over `label`; `hidden`: artists left out of the static part; `copies`: (source, target)
        pixel boxes (top, left, height, width) copied once it is drawn."""
        draw_colorbar(self.fig, label)
        self._hidden = [*([self.status] if self.status is not None else []), *hidden]
        self._copies = list(copies)
        self._static: np.ndarray | None = None

    def prepare(self) -> None:
        """Draw the static part now (else the first `render` does)."""
        self._pixels()

    def _pixels(self) -> np.ndarray:
        if self._static is None:
            visible = [a.get_visible() for a in self._hidden]
            for artist in self._hidden:
                artist.set_visible(False)
            self._canvas.draw()
            self._static = np.asarray(self._canvas.buffer_rgba())[..., :3].copy()  # (H, W, 3)
            for (y, x, h, w), (to_y, to_x, _, _) in self._copies:  # hidden labels: the same pixels
                self._static[to_y : to_y + h, to_x : to_x + w] = self._static[y : y + h, x : x + w]
            for artist, was in zip(self._hidden, visible, strict=True):
                artist.set_visible(was)
        return self._static.copy()

    def _say(self, status: str | None) -> None:
        """The status line of a `draw`."""
        if self.status is not None:
            self.status.set_text(status or "")

    def _stamp(self, pixels: np.ndarray, status: str | None) -> np.ndarray:
        """`pixels` with the status line of a `render` written in."""
        if self.status is not None and status:
            write_texts(pixels, [(self.status_xy, status)], TITLE_PX, STATUS_COLOUR)
        return pixels
