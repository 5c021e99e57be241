"""One-shot figures: attention heatmaps (queries down, keys across: `weights[q, k]`), rollout bars and confusion
matrices as matplotlib Figures, never through pyplot (a notebook's backend stays as it is)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..files import atomic_write
from .bars import RolloutBars
from .figures import AttentionGrid
from .rollout import attention_rollout, pooled_rollout
from .scales import DEFAULT_SCALE
from .style import DPI, MAX_TOKENS, as_numpy
from .windows import key_window, window_labels, window_note
from .words import POOLED_ROW, pooled_row


def attention_window(
    tokens: Sequence[str], weights: np.ndarray | torch.Tensor, max_tokens: int | None = MAX_TOKENS
) -> tuple[list[str], np.ndarray]:
    """Check shapes and cut `tokens` and the (T, T) or (H, T, T) `weights` to the first `max_tokens`."""
    w = as_numpy(weights)
    if w.ndim not in (2, 3) or w.shape[-1] != w.shape[-2]:
        raise ValueError(f"attention weights must be (T, T) or (H, T, T), got shape {tuple(w.shape)}")
    if w.shape[-1] != len(tokens):
        raise ValueError(
            f"{len(tokens)} tokens for a {w.shape[-1]} x {w.shape[-1]} attention map: strip padding from the "
            "weights (weights[..., :n, :n]) or pass one token per position"
        )
    n = len(tokens) if max_tokens is None else min(len(tokens), max_tokens)
    return list(tokens[:n]), w[..., :n, :n]


def noted(title: str | None, note: str) -> str | None:
    """`title` with `note` after it (or the note alone)."""
    return (f"{title}  ({note})" if title else note) if note else title


def plot_attention(
    tokens: Sequence[str],
    weights: np.ndarray | torch.Tensor,
    title: str | None = None,
    *,
    max_tokens: int | None = MAX_TOKENS,
    panel_titles: Sequence[str] | None = None,
    ncols: int = 2,
    mean: bool = False,
    scale: str = DEFAULT_SCALE,
    pooling: str = "cls",
    keep: Sequence[int] | None = None,
) -> Figure:
    """A heatmap of one (T, T) map, or a panel per head of (H, T, T) (with `mean`, then their mean), without
    padding. A text longer than `max_tokens` shows the tokens `keep`, by default the keys its pooled row reads
    most with their neighbours (`key_window`), coloured as in the whole text."""
    attention_window(tokens, weights, None)  # shapes checked
    full = as_numpy(weights)
    if keep is None:
        keep = key_window(pooled_row(full, pooling), len(tokens) if max_tokens is None else max_tokens)
    keep = list(keep)
    shown, w = window_labels(tokens, keep), full[..., keep, :][..., keep]
    maps = w[None] if w.ndim == 2 else w  # (H, n, n)
    H = maps.shape[0]
    if panel_titles is None:
        panel_titles = [f"head {h}" for h in range(H)] if w.ndim == 3 else [""]
    if mean and H > 1:
        maps = np.concatenate([maps, maps.mean(axis=0, keepdims=True)])  # (H + 1, n, n)
        panel_titles, H = [*panel_titles, "mean of heads"], H + 1
    if len(panel_titles) != H:
        raise ValueError(f"{len(panel_titles)} panel titles for {H} attention maps")
    title = noted(title, window_note(len(keep), len(tokens), POOLED_ROW[pooling]))
    return AttentionGrid(shown, panel_titles, title, ncols=ncols, scale=scale, length=len(tokens)).draw(maps)


def plot_rollout(
    tokens: Sequence[str],
    attentions: Sequence[np.ndarray | torch.Tensor],
    title: str | None = None,
    *,
    pooling: str = "cls",
    max_tokens: int | None = MAX_TOKENS,
    scale: str = DEFAULT_SCALE,
) -> Figure:
    """Bars of each token's share in the pooled vector by attention rollout (`attentions`: an (H, T, T) map per
    layer, without padding); a text longer than `max_tokens` shows its largest shares and their neighbours."""
    shares = pooled_rollout(attention_rollout(attentions), pooling)
    if len(shares) != len(tokens):
        raise ValueError(f"{len(tokens)} tokens for a rollout over {len(shares)} positions: strip padding first")
    keep = key_window(shares, len(tokens) if max_tokens is None else max_tokens)
    title = noted(title, window_note(len(keep), len(tokens), f"{POOLED_ROW[pooling]} through all layers"))
    return RolloutBars(window_labels(tokens, keep), title, scale=scale, length=len(tokens)).draw(shares[keep])


def plot_confusion_matrix(
    matrix: np.ndarray | torch.Tensor, label_names: Sequence[str], title: str | None = None
) -> Figure:
    """Counts of (true row, predicted column), each cell annotated, rows normalised for the colour."""
    m = as_numpy(matrix)
    C = len(label_names)
    if m.shape != (C, C):
        raise ValueError(f"confusion matrix of shape {tuple(m.shape)} for {C} label names")
    recall = m / np.clip(m.sum(axis=1, keepdims=True), 1, None)  # colour: fraction of each true class
    size = max(3.2, 0.6 * C + 1.8)
    fig = Figure(figsize=(size + 0.8, size), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    image = ax.imshow(recall, cmap="Blues", vmin=0.0, vmax=1.0)
    names = list(label_names)
    ax.set_xticks(range(C), names, rotation=45, ha="right")
    ax.set_yticks(range(C), names)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    if C <= 20:
        for i in range(C):
            for j in range(C):
                color = "white" if recall[i, j] > 0.5 else "black"
                ax.text(j, i, f"{int(m[i, j])}", ha="center", va="center", color=color, fontsize=9)
    fig.colorbar(image, ax=ax, shrink=0.8, label="fraction of true class")
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def figure_to_array(fig: Figure) -> np.ndarray:
    """Render `fig` to an (H, W, 3) uint8 RGB array, for `add_image(..., dataformats="HWC")`."""
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()  # (H, W, 3)


def save_attention_png(
    path: str | Path, tokens: Sequence[str], weights: Any, title: str | None = None, **kw: Any
) -> Path:
    """`plot_attention(tokens, weights, title, **kw)` written to `path` as a PNG (atomically)."""
    return save_figure(plot_attention(tokens, weights, title, **kw), path)


def save_figure(fig: Figure, path: str | Path) -> Path:
    """`fig` written to `path` as a PNG, atomically (files.atomic_write); returns the path."""
    return atomic_write(path, lambda f: fig.savefig(f, format="png"))
