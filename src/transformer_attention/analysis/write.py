"""What the analyses found (run.py's `Analysis`), for people: its figures (`figures`, drawn once as `images` for
the folder and the loggers), JSON and a markdown table in a folder (`write_files`), the narrower table of
TensorBoard's TEXT tab (`text_table`) and the console summary (`summary`)."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from PIL import Image

from ..files import atomic_write
from ..plotting import figure_to_array, plot_faithfulness, plot_head_importance, plot_pruning
from .removal import REMOVAL_PHRASES
from .report import PLAUSIBILITY
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


def to_dict(found: Analysis) -> dict[str, Any]:
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


NBSP, MINUS = "\u00a0", "\u2212"  # a space and a minus sign no browser breaks a line at
TEXT_COLUMNS = {  # measure -> header of the TEXT tab's table: the averages over k, the per-k values are in the file
    "comprehensiveness": "compr.",
    "sufficiency": "suff.",
    "aopc": "AOPC",
    "naopc": "nAOPC",
    **PLAUSIBILITY,  # AUPRC, token F1, ERASER's comprehensiveness and sufficiency per word
    "tau_leave_one_out": "\u03c4 LOO",
    "tau_integrated_gradients": "\u03c4 IG",
}


def text_table(found: Analysis) -> str:
    """The faithfulness table as TensorBoard's TEXT tab shows it without wrapping a number or a header: a column
    per measure averaged over k (those measured), the mean alone, to 3 decimals, and no space or minus sign that a
    line may break at; faithfulness.md keeps every column with its standard errors. Empty without faithfulness."""
    f = found.faithfulness
    if f is None:
        return ""
    measured = [m for m in TEXT_COLUMNS if any(not math.isnan(s.get(m, math.nan)) for s in f.scores.values())]
    head = ["method", *(TEXT_COLUMNS[m] for m in measured), "s/text"]
    lines = ["| " + " | ".join(_unbroken(h) for h in head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for method in sorted(f.scores, key=lambda m: -f.scores[m]["aopc"]):
        values = [f.scores[method].get(m, math.nan) for m in measured]
        cells = [method, *("-" if math.isnan(v) else f"{v:.3f}" for v in values)]
        per_text = f.scores[method].get("seconds_per_text", math.nan)
        cells.append("-" if per_text is None or math.isnan(per_text) else f"{per_text:.3g}")
        lines.append("| " + " | ".join(_unbroken(c) for c in cells) + " |")
    return "\n".join(lines)


def _unbroken(cell: str) -> str:
    """`cell` with its spaces and minus signs as the characters a line does not break at."""
    return cell.replace(" ", NBSP).replace("-", MINUS) if cell != "-" else cell


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
