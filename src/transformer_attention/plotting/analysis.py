"""The analyses' figures, sized for TensorBoard's image card: which heads matter (a layer x head heatmap per
measure), accuracy as heads are pruned, how faithful each attribution is (bars per method). No pyplot."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from .style import CARD_PX, DPI, FONT_PX, TITLE_PX, draw_header, header_px, text_px

MEASURES = (  # what plot_faithfulness draws, and how to read it
    ("comprehensiveness", "comprehensiveness: higher is better"),
    ("sufficiency", "sufficiency: lower is better"),
    ("aopc", "AOPC (deletion curve): higher is better"),
)


def _figure(width_px: float, body_px: float, title: str | None, *, left: float, top: float, bottom: float) -> Figure:
    """A figure `body_px` high below its wrapped `title`, margins in pixels: a fixed layout (the constrained one
    took most of the time these figures cost)."""
    head = header_px(title, width_px, status=False) if title else 0
    H = head + top + body_px + bottom
    fig = Figure(figsize=(width_px / DPI, H / DPI), dpi=DPI)
    FigureCanvasAgg(fig)
    draw_header(fig, title, status=False)
    fig.subplots_adjust(left=left / width_px, right=1 - 14 / width_px, top=1 - (head + top) / H, bottom=bottom / H)
    return fig


def _stack(fig: Figure, n: int, panel_px: float, gap_px: float) -> list:
    """`n` axes stacked top to bottom, each `panel_px` high, `gap_px` apart (room for a title and ticks)."""
    H = fig.get_figheight() * DPI
    left, right = fig.subplotpars.left, fig.subplotpars.right
    top = (1 - fig.subplotpars.top) * H
    axes = []
    for i in range(n):
        y = top + i * (panel_px + gap_px)
        axes.append(fig.add_axes((left, 1 - (y + panel_px) / H, right - left, panel_px / H)))
    return axes


def plot_head_importance(
    tables: Mapping[str, np.ndarray], title: str | None = None, *, signed: Sequence[str] = ()
) -> Figure:
    """A layer x head heatmap per entry of `tables` (name -> (L, H)), each cell annotated; those named in `signed`
    on a diverging scale centred on 0."""
    names = list(tables)
    L, H = np.asarray(tables[names[0]]).shape
    cell = max(22, min(48, (CARD_PX - 70) // H))
    gap = 44  # a panel's title above it, the head labels below it
    body = len(names) * L * cell + (len(names) - 1) * gap
    fig = _figure(max(CARD_PX, 70 + H * cell), body, title, left=56, top=20, bottom=24)
    for ax, name in zip(_stack(fig, len(names), L * cell, gap), names, strict=True):
        values = np.asarray(tables[name], dtype=np.float64)
        if name in signed:
            reach = max(float(np.abs(values).max()), 1e-12)
            image = ax.imshow(values, cmap="RdBu_r", norm=TwoSlopeNorm(0.0, -reach, reach), aspect="auto")
        else:
            image = ax.imshow(values, cmap="viridis", vmin=0.0, vmax=max(float(values.max()), 1e-12), aspect="auto")
        ax.set_title(name, fontsize=TITLE_PX)
        ax.set_xticks(range(H), [f"head {h}" for h in range(H)], fontsize=FONT_PX)
        ax.set_yticks(range(L), [f"layer {l}" for l in range(L)], fontsize=FONT_PX)  # noqa: E741
        for (i, j), v in np.ndenumerate(values):
            shade = image.norm(v)
            colour = "white" if (shade < 0.5 if name not in signed else abs(shade - 0.5) > 0.3) else "black"
            ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=FONT_PX, color=colour)
    return fig


def plot_pruning(
    curves: Mapping[str, Sequence[float]], title: str | None = None, *, ylabel: str = "accuracy"
) -> Figure:
    """Accuracy (or `ylabel`) against the number of heads masked out, one line per pruning order."""
    fig = _figure(CARD_PX, 200, title, left=46, top=8, bottom=36)
    ax = fig.subplots()
    for i, (name, values) in enumerate(curves.items()):  # dashed after the first: equal orders stay visible
        ax.plot(range(len(values)), values, marker="o", markersize=3, linewidth=1.2, label=name, linestyle="-:"[i % 2])
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("heads masked out (least important first)", fontsize=FONT_PX)
    ax.set_ylabel(ylabel, fontsize=FONT_PX)
    ax.tick_params(labelsize=FONT_PX)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=FONT_PX, title="ordered by", title_fontsize=FONT_PX)
    return fig


def plot_faithfulness(
    scores: Mapping[str, Mapping[str, float]],
    errors: Mapping[str, Mapping[str, float]] | None = None,
    title: str | None = None,
) -> Figure:
    """Bars of each method's comprehensiveness, sufficiency and AOPC (`scores`: method -> measure -> value), with
    standard errors, a panel per measure, the best AOPC on top."""
    methods = sorted(scores, key=lambda m: -scores[m]["aopc"])
    row, gap = 15, 46  # a panel's title above it, the value ticks below it
    left = 12 + max(text_px(m, FONT_PX) for m in methods)
    body = len(MEASURES) * len(methods) * row + (len(MEASURES) - 1) * gap
    fig = _figure(CARD_PX, body, title, left=left, top=20, bottom=24)
    for ax, (measure, label) in zip(_stack(fig, len(MEASURES), len(methods) * row, gap), MEASURES, strict=True):
        values = [scores[m][measure] for m in methods]
        spread = [errors[m][measure] for m in methods] if errors else None
        colours = ["#bbbbbb" if m == "random" else "#3b75af" for m in methods]
        ax.barh(range(len(methods)), values, xerr=spread, color=colours, height=0.7, error_kw={"linewidth": 0.8})
        ax.set_yticks(range(len(methods)), methods, fontsize=FONT_PX)
        ax.invert_yaxis()
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_title(label, fontsize=FONT_PX + 1)
        ax.tick_params(axis="x", labelsize=FONT_PX)
        ax.grid(axis="x", alpha=0.3)
    return fig
