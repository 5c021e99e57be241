"""Run the analyses a run asks for on its data, and keep what they found: `plan` checks every input before any
work (unknown names, sample sizes against the splits), `run_analyses` scores the heads (heads.py) and the token
attributions (faithfulness.py), `Analysis.write` saves PNG, JSON and a markdown table in a folder, and
`Analysis.summary` is what the console prints."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from PIL import Image
from tokenizers import Tokenizer
from torch import nn

from ..errors import ConfigError
from ..files import atomic_write
from ..plotting import figure_to_array, plot_faithfulness, plot_head_importance, plot_pruning
from .faithfulness import Explained, Faithfulness, explain_texts, faithfulness
from .heads import HeadImportance, head_importance
from .removal import REMOVALS, replacement
from .settings import ExplainConfig, check_analyses, check_explain, sample_size

HEADS_SPLIT = "validation"  # head importance is measured where a model is chosen, never on test
PAGE_METHODS = ("attention", "rollout", "integrated_gradients", "leave_one_out", "random")  # predict.py's pages


@dataclass
class Plan:
    """What the analyses will take: the split and number of rows for each, checked against the data."""

    names: list[str]
    settings: ExplainConfig
    split: str  # faithfulness texts
    samples: int = 0
    heads_samples: int = 0

    @property
    def splits(self) -> set[str]:
        """The splits the planned analyses read."""
        return ({self.split} if "faithfulness" in self.names else set()) | (
            {HEADS_SPLIT} if "heads" in self.names else set()
        )


def explain_settings(values: Mapping[str, Any] | ExplainConfig | None) -> ExplainConfig:
    """`values` (a config node, a dict, or settings already) as checked ExplainConfig settings."""
    if isinstance(values, ExplainConfig):
        return values
    plain = {
        key: (list(v) if isinstance(v, Sequence) and not isinstance(v, str) else v) for key, v in (values or {}).items()
    }
    check_explain(plain)
    return ExplainConfig(**plain)


def plan(names: Any, settings: Any, sizes: Mapping[str, int], split: str, prefix: str = "explain.") -> Plan:
    """Check the analyses' inputs against the data before any work: known `names`, valid `settings`, and sample
    sizes no larger than the splits (`sizes`: split -> rows). `split`: the faithfulness texts' split when the
    settings give none. A ConfigError names the bad value and the fix."""
    chosen = explain_settings(settings)
    out = Plan(names=check_analyses(names), settings=chosen, split=chosen.split or split)
    if "faithfulness" in out.names:
        if out.split not in sizes:
            raise ConfigError(f"{prefix}split={out.split}: the data has no such split (splits: {', '.join(sizes)})")
        out.samples = sample_size(chosen.samples, sizes[out.split], f"{prefix}samples", out.split)
    if "heads" in out.names:
        if HEADS_SPLIT not in sizes:
            raise ConfigError("analysis=heads scores heads on the validation split, which the data lacks: give it one")
        out.heads_samples = sample_size(chosen.heads_samples, sizes[HEADS_SPLIT], f"{prefix}heads_samples", HEADS_SPLIT)
    return out


def sample(available: int, size: int, seed: int) -> list[int]:
    """`size` of `available` row indices, drawn without replacement with `seed`, in order."""
    if size >= available:
        return list(range(available))
    return sorted(np.random.default_rng(seed).choice(available, size=size, replace=False).tolist())


@dataclass
class Analysis:
    """What the analyses found, and how long each took."""

    heads: HeadImportance | None = None
    faithfulness: Faithfulness | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    settings: dict = field(default_factory=dict)

    def images(self, label: str = "") -> dict[str, np.ndarray]:
        """name -> (H, W, 3) uint8 image of each figure (`figures`), each drawn once: what the files and the loggers
        get."""
        return {name: figure_to_array(fig) for name, fig in self.figures(label).items()}

    def figures(self, label: str = "") -> dict[str, Figure]:
        """name -> figure: `heads` (the heatmaps), `pruning` (the curves), `faithfulness` (the bars)."""
        out = {}
        about = f", {label}" if label else ""
        if self.heads is not None:
            h = self.heads
            tables = {
                "accuracy drop when masked alone": h.accuracy_drop,
                "loss increase when masked alone": h.loss_increase,
                "gradient score E|dL/dξ|": h.gradient,
            }
            title = f"head importance, {h.rows} validation rows{about}"
            out["heads"] = plot_head_importance(tables, title, signed=list(tables)[:2])
            curves = {name: c["accuracy"] for name, c in h.pruning.items()}
            out["pruning"] = plot_pruning(curves, f"accuracy as heads are masked out{about}")
        if self.faithfulness is not None:
            f = self.faithfulness
            title = f"faithfulness, {f.texts} {f.split} texts, words {REMOVALS[f.removal]}{about}"
            out["faithfulness"] = plot_faithfulness(f.scores, f.sem, title)
        return out

    def to_dict(self) -> dict:
        return {
            "settings": self.settings,
            "seconds": self.seconds,
            "heads": None if self.heads is None else self.heads.to_dict(),
            "faithfulness": None if self.faithfulness is None else self.faithfulness.to_dict(),
        }

    def summary(self) -> list[str]:
        lines = []
        if self.heads is not None:
            lines += ["head importance (masking each head; Michel et al. 2019):"]
            lines += [f"  {line}" for line in self.heads.summary()]
        if self.faithfulness is not None:
            f = self.faithfulness
            lines += [f"faithfulness (ERASER; {f.texts} {f.split} texts, words {REMOVALS[f.removal]}):"]
            lines += [f"  {line}" for line in f.summary()]
        return lines

    def write(self, folder: str | Path, images: Mapping[str, np.ndarray] | None = None) -> list[Path]:
        """heads.json, heads.png, pruning.png, faithfulness.json, faithfulness.png and faithfulness.md (those the
        analyses made) in `folder`, the PNGs from `images` (None: drawn now); returns their paths."""
        folder = Path(folder)
        paths = []
        for name, image in (self.images() if images is None else images).items():
            buffer = io.BytesIO()
            Image.fromarray(image).save(buffer, format="png", compress_level=1)
            paths.append(atomic_write(folder / f"{name}.png", buffer.getvalue()))
        found = self.to_dict()
        for name in ("heads", "faithfulness"):
            if found[name] is not None:
                record = {"settings": self.settings, "seconds": self.seconds.get(name), **found[name]}
                paths.append(atomic_write(folder / f"{name}.json", json.dumps(_plain(record), indent=1) + "\n"))
        if self.faithfulness is not None:
            paths.append(atomic_write(folder / "faithfulness.md", "\n".join(self.faithfulness.table()) + "\n"))
        return paths


def run_analyses(
    net: nn.Module,
    chosen: Plan,
    *,
    splits: Mapping[str, Any],
    tokenizer: Tokenizer,
    progress: bool | None = None,
) -> Analysis:
    """Run `chosen` (from `plan`) on `net`, a TransformerClassifier. `splits`: split name -> its rows (an
    EncodedDataset: `.ids`, `.labels`). Samples are drawn with the settings' seed, so a rerun scores the same rows."""
    s = chosen.settings
    result = Analysis(settings=asdict(s))
    pad_id = getattr(net, "pad_id", 0)
    if "heads" in chosen.names:
        start = time.perf_counter()
        data = splits[HEADS_SPLIT]
        picked = sample(len(data.ids), chosen.heads_samples, s.seed)
        result.heads = head_importance(
            net, [data.ids[i] for i in picked], [data.labels[i] for i in picked],
            batch_size=s.batch_size, pad_id=pad_id, progress=progress,
        )  # fmt: skip
        result.seconds["heads"] = time.perf_counter() - start
    if "faithfulness" in chosen.names:
        start = time.perf_counter()
        data = splits[chosen.split]
        picked = sample(len(data.ids), chosen.samples, s.seed)
        rows = [data.ids[i] for i in picked]
        kind, mask_id = replacement(s.removal, tokenizer)
        result.faithfulness = faithfulness(
            net, rows,
            tokens=[[tokenizer.id_to_token(int(t)) for t in row] for row in rows],
            split=chosen.split, k=s.k, removal=kind, mask_id=mask_id,
            ig_steps=s.ig_steps, seed=s.seed, batch_size=s.batch_size, pad_id=pad_id, progress=progress,
        )  # fmt: skip
        result.seconds["faithfulness"] = time.perf_counter() - start
    return result


def explain_rows(
    net: nn.Module, rows: Sequence[Sequence[int]], tokenizer: Tokenizer, settings: Any
) -> tuple[list[Explained | None], str]:
    """Each row's attributions by PAGE_METHODS and their ERASER scores on it (None for a row with no word), and
    how words were removed ("replaced by [MASK]" or "deleted"): what predict.py's attention pages show."""
    s = explain_settings(settings)
    kind, mask_id = replacement(s.removal, tokenizer)
    keep = [i for i, row in enumerate(rows) if len(row) > 1]
    explained, _ = explain_texts(
        net, [rows[i] for i in keep], k=s.k, mask_id=mask_id,
        methods=PAGE_METHODS, ig_steps=s.ig_steps, seed=s.seed, batch_size=s.batch_size,
        pad_id=getattr(net, "pad_id", 0),
    )  # fmt: skip
    out: list[Explained | None] = [None] * len(rows)
    for i, e in zip(keep, explained, strict=True):
        out[i] = e
    return out, REMOVALS[kind]


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
