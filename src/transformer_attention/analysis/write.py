"""What the analyses found (run.py's `Analysis`), for people: its figures (`figures`, drawn once as `images` for
the folder and the loggers), JSON and a markdown table in a folder (`write_files`), and the console summary
(`summary`)."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from PIL import Image

from ..files import atomic_write
from ..plotting import figure_to_array, plot_faithfulness, plot_head_importance, plot_pruning
from .removal import REMOVAL_PHRASES
from .run import Analysis


def figures(found: Analysis, label: str = "") -> dict[str, Figure]:
    """name -> figure: `heads` (the heatmaps), `pruning` (the curves), `faithfulness` (the bars). `label` says
    which weights were analysed, in the titles."""
    out = {}
    about = f", {label}" if label else ""
    if found.heads is not None:
        h = found.heads
        tables = {
            "accuracy drop when masked alone": h.accuracy_drop,
            "loss increase when masked alone": h.loss_increase,
            "gradient score E|dL/dξ|": h.gradient,
        }
        title = f"head importance, {h.rows} validation rows{about}"
        out["heads"] = plot_head_importance(tables, title, signed=list(tables)[:2])
        curves = {name: c["accuracy"] for name, c in h.pruning.items()}
        out["pruning"] = plot_pruning(curves, f"accuracy as heads are masked out{about}")
    if found.faithfulness is not None:
        f = found.faithfulness
        title = f"faithfulness, {f.texts} {f.split} texts, words {REMOVAL_PHRASES[f.removal]}{about}"
        out["faithfulness"] = plot_faithfulness(f.scores, f.sem, title)
    return out


def images(found: Analysis, label: str = "") -> dict[str, np.ndarray]:
    """name -> (H, W, 3) uint8 image of each figure (`figures`), each drawn once: what the files and the loggers
    get."""
    return {name: figure_to_array(fig) for name, fig in figures(found, label).items()}


def to_dict(found: Analysis) -> dict:
    """Everything the analyses found, JSON-ready but for NaN (`write_files` writes it as null)."""
    return {
        "settings": found.settings,
        "seconds": found.seconds,
        "heads": None if found.heads is None else found.heads.to_dict(),
        "faithfulness": None if found.faithfulness is None else found.faithfulness.to_dict(),
    }


def summary(found: Analysis) -> list[str]:
    """The lines the console prints: each analysis' own summary under a heading."""
    lines = []
    if found.heads is not None:
        lines += ["head importance (masking each head; Michel et al. 2019):"]
        lines += [f"  {line}" for line in found.heads.summary()]
    if found.faithfulness is not None:
        f = found.faithfulness
        lines += [f"faithfulness (ERASER; {f.texts} {f.split} texts, words {REMOVAL_PHRASES[f.removal]}):"]
        lines += [f"  {line}" for line in f.summary()]
    return lines


def write_files(found: Analysis, folder: str | Path, drawn: Mapping[str, np.ndarray] | None = None) -> list[Path]:
    """heads.json, heads.png, pruning.png, faithfulness.json, faithfulness.png and faithfulness.md (those the
    analyses made) in `folder`, the PNGs from `drawn` (`images`; None: drawn now); returns their paths."""
    folder = Path(folder)
    paths = []
    for name, image in (images(found) if drawn is None else drawn).items():
        buffer = io.BytesIO()
        Image.fromarray(image).save(buffer, format="png", compress_level=1)
        paths.append(atomic_write(folder / f"{name}.png", buffer.getvalue()))
    record = to_dict(found)
    for name in ("heads", "faithfulness"):
        if record[name] is not None:
            kept = {"settings": found.settings, "seconds": found.seconds.get(name), **record[name]}
            paths.append(atomic_write(folder / f"{name}.json", json.dumps(_plain(kept), indent=1) + "\n"))
    if found.faithfulness is not None:
        paths.append(atomic_write(folder / "faithfulness.md", "\n".join(found.faithfulness.table()) + "\n"))
    return paths


def _plain(value: Any) -> Any:
    """JSON-ready: NaN as None (JSON has no NaN), NumPy numbers as Python's."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value
