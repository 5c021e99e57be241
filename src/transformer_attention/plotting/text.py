"""The review as text, its words wrapped as paragraphs and each shaded by the weight the pooled row gives it (a word
cut into pieces: the mean of its pieces', as on the page), a paragraph per view (a layer's mean of heads, a head,
the rollout), 12 px text on the image card; like the maps (figures.py), the static part is drawn once. A leading
[CLS] is no word of the review: no paragraph shades it, and an attention paragraph's label states its share."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.figure import Figure
from PIL import Image, ImageDraw

from .rollout import attention_rollout, pooled_rollout
from .scales import DEFAULT_SCALE, check_kind, check_scale, scale_note, scaled
from .style import (
    BAR_PX,
    CARD_PX,
    DPI,
    TITLE_PX,
    Drawn,
    as_numpy,
    colors,
    font,
    header_px,
)
from .words import POOLED_ROW, join_pieces, pooled_row, word_values

TEXT_PX = 12  # the words (DejaVu Sans: capitals 9 px high)
LINE_PX = TEXT_PX + 6  # a line of words: the text and its shaded box
PAD_PX, SPACE_PX, EDGE_PX = 2, 3, 4  # inside a word's box, between boxes, at the image's edges
LABEL_PX = TITLE_PX + 6  # a paragraph's label line
SCALE_PX = 60  # a signed paragraph's colour scale, at the right of its label line


class ReviewText(Drawn):
    """`paragraphs` copies of the text's words wrapped to `width` px, each word on a box coloured by its weight on
    `scale` (the mean of its pieces', `word_values`); the first `signed` paragraphs are signed scores, each with
    the scale of its colours. `render(pooled, labels, status)` takes (paragraphs, T) pooled rows, returns pixels."""

    def __init__(
        self,
        tokens: Sequence[str],
        paragraphs: int,
        title: str | None = None,
        *,
        pooling: str = "cls",
        scale: str = DEFAULT_SCALE,
        status: bool = False,
        width: int = CARD_PX,
        kind: str = "weight",
        signed: int = 0,
    ) -> None:
        if not tokens or paragraphs < 1:
            raise ValueError(
                f"a text view needs tokens and paragraphs, got {len(tokens)} tokens, {paragraphs} paragraphs"
            )
        if pooling not in POOLED_ROW:
            raise ValueError(f"pooling={pooling!r}: expected one of {', '.join(map(repr, POOLED_ROW))}")
        self.scale, self.pooling, self.paragraphs = check_scale(scale), pooling, paragraphs
        self.signed = signed  # the first `signed` paragraphs: signed scores, blue for the class and orange against
        self.tokens, self.words = list(tokens), join_pieces(tokens)
        self.first = int(self.tokens[0] == "[CLS]" and len(self.words) > 1)  # [CLS]: no word of the review
        face = font(TEXT_PX)
        self.boxes: list[tuple[int, int, int]] = []  # (x px, line, width px) of each word's box, [CLS] left out
        x, line = EDGE_PX, 0
        for word in self.words[self.first :]:
            w = int(np.ceil(face.getlength(word.text))) + 2 * PAD_PX
            if x + w > width - EDGE_PX and x > EDGE_PX:
                x, line = EDGE_PX, line + 1
            self.boxes.append((x, line, w))
            x += w + SPACE_PX
        self.lines = line + 1
        self.head = header_px(title, width, status)
        self.block = LABEL_PX + self.lines * LINE_PX + 8  # one paragraph: its label, its lines, a gap
        H = self.head + paragraphs * self.block + BAR_PX
        self._start(width, H, title, status)
        given = ("weight", "weights") if check_kind(kind) == "weight" else ("weight x norm share", "shares")
        what = f"the {given[0]} {POOLED_ROW[pooling]} gives each word (a word in pieces: the mean of its {given[1]})"
        self._freeze(f"{what} \u00b7 {scale_note(scale)}")

    def word_colours(self, pooled: np.ndarray | torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """Each word's weight (the mean of its pieces') in the (P, T) `pooled` rows, and its value on the scale;
        the words shown, [CLS] left out."""
        r = as_numpy(pooled)
        if r.shape != (self.paragraphs, len(self.tokens)):
            raise ValueError(f"{tuple(r.shape)} rows for {self.paragraphs} paragraphs of {len(self.tokens)} tokens")
        weights = np.stack([word_values(row, self.words, combine="mean")[self.first :] for row in r])  # (P, words)
        values = scaled(weights, self.scale)
        for p in range(min(self.signed, len(weights))):  # a signed row: its size over the text's largest, sign kept
            top = np.abs(weights[p]).max()
            values[p] = weights[p] / top if top > 0 else 0.0
        return weights, values

    def render(self, pooled: np.ndarray | torch.Tensor, labels: Sequence[str], status: str | None = None) -> np.ndarray:
        """The (H, W, 3) uint8 pixels: paragraph p shaded by `pooled[p]` (T,) under the label `labels[p]`."""
        if len(labels) != self.paragraphs:
            raise ValueError(f"{len(labels)} labels for {self.paragraphs} paragraphs")
        weights, values = self.word_colours(pooled)
        image = Image.fromarray(self._pixels())
        draw, face = ImageDraw.Draw(image), font(TEXT_PX)
        for p, (label, row) in enumerate(zip(labels, values, strict=True)):
            top = self.head + p * self.block
            if p < self.signed:  # the scale of its colours: full colour at the text's largest size
                self._signed_scale(draw, top, float(np.abs(weights[p]).max(initial=0.0)))
            elif self.first:
                label = f"{label} · [CLS] itself {as_numpy(pooled)[p][0]:.2g}"
            draw.text((EDGE_PX, top + 2), label, font=font(TITLE_PX), fill="black")
            shades = signed_colours(row) if p < self.signed else colors(row)
            for word, (x, line, w), colour in zip(self.words[self.first :], self.boxes, shades, strict=True):
                y = top + LABEL_PX + line * LINE_PX
                draw.rectangle((x, y, x + w - 1, y + LINE_PX - 3), fill=tuple(int(c) for c in colour))
                light = float(colour @ np.array([0.299, 0.587, 0.114])) < 140  # dark box: white letters
                draw.text((x + PAD_PX, y + 1), word.text, font=face, fill="white" if light else "black")
        return self._stamp(np.asarray(image).copy(), status)

    def _signed_scale(self, draw: ImageDraw.ImageDraw, top: int, size: float) -> None:
        """A signed paragraph's scale at the right of its label line: orange (-size) to white (0) to blue (+size)."""
        small, width = font(TITLE_PX - 1), SCALE_PX
        ends = (f"−{size:.2g}", f"+{size:.2g}")
        right = self.fig.bbox.width - EDGE_PX - small.getlength(ends[1]) - 3
        left = right - width
        ramp = signed_colours(np.linspace(-1.0, 1.0, width))  # (width, 3)
        for i, colour in enumerate(ramp):
            draw.line((left + i, top + 4, left + i, top + TITLE_PX + 1), fill=tuple(int(c) for c in colour))
        draw.rectangle((left - 1, top + 3, right, top + TITLE_PX + 2), outline=(170, 170, 170))
        draw.text((left - small.getlength(ends[0]) - 3, top + 2), ends[0], font=small, fill="black")
        draw.text((right + 3, top + 2), ends[1], font=small, fill="black")

    def draw(self, pooled: np.ndarray | torch.Tensor, labels: Sequence[str], status: str | None = None) -> Figure:
        """A figure of the rendered text (a notebook displays it)."""
        pixels = self.render(pooled, labels, status)
        H, W = pixels.shape[:2]
        fig = Figure(figsize=(W / DPI, H / DPI), dpi=DPI)
        fig.figimage(pixels, resize=False)
        return fig


FOR, AGAINST = np.array([31, 119, 180]), np.array([255, 127, 14])  # the page's colours (page/words.js)


def signed_colours(values: np.ndarray) -> np.ndarray:
    """RGB uint8 colours of values in [-1, 1]: white to blue towards the class explained, to orange against it."""
    v = np.clip(np.asarray(values, dtype=np.float64), -1.0, 1.0)[:, None]  # (words, 1)
    tint = np.where(v >= 0, FOR, AGAINST)  # (words, 3)
    return np.rint(255.0 + np.abs(v) * (tint - 255.0)).astype(np.uint8)


def paragraphs(
    layers: Sequence[np.ndarray | torch.Tensor], pooling: str = "cls", heads: int = 0, shares: np.ndarray | None = None
) -> tuple[np.ndarray, list[str]]:
    """A text view's pooled rows (P, T) and labels from an (H, T, T) map per layer: each layer's (mean of heads)
    and its `heads` most focused heads, then the rollout's (`shares`, when already computed)."""
    pooled, labels = [], []
    for layer, weights in enumerate(layers):
        w = as_numpy(weights)  # (H, T, T)
        pooled.append(pooled_row(w, pooling))
        labels.append(f"layer {layer} \u00b7 mean of heads")
        own = np.stack([pooled_row(head, pooling) for head in w])  # (H, T)
        entropy = -(own * np.log(np.clip(own, 1e-12, None))).sum(axis=1)
        for h in np.argsort(entropy, kind="stable")[:heads]:
            pooled.append(own[h])
            labels.append(f"layer {layer} \u00b7 head {h}")
    pooled.append(pooled_rollout(attention_rollout(layers), pooling) if shares is None else shares)
    labels.append(f"rollout through {len(layers)} layer{'s' if len(layers) > 1 else ''}")
    return np.stack(pooled), labels
