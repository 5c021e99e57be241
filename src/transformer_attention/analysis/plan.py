"""What the analyses a run asks for will take, checked before any work: the settings (`analysis_settings`), the
names and sample sizes against the splits (`plan`), and the seeded rows each analysis reads (`Plan.rows`).
Running them is run.py's job, writing what they found write.py's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError
from .settings import AnalysisConfig, check_analyses, check_analysis_settings, sample_size

HEADS_SPLIT = "validation"  # head importance is measured where a model is chosen, never on test


@dataclass
class Plan:
    """What the analyses will take: the split and number of rows for each, checked against the data."""

    names: list[str]
    settings: AnalysisConfig
    split: str  # faithfulness texts
    samples: int = 0
    heads_samples: int = 0

    @property
    def splits(self) -> set[str]:
        """The splits the planned analyses read."""
        return ({self.split} if "faithfulness" in self.names else set()) | (
            {HEADS_SPLIT} if "heads" in self.names else set()
        )

    def rows(self, name: str, splits: Mapping[str, Any]) -> tuple[list[Any], list[int]]:
        """The token-id rows and labels analysis `name` reads from `splits` (split name -> an EncodedDataset:
        `.ids`, `.labels`): a sample drawn with the settings' seed, so a rerun (or the cost estimate) gets the same."""
        data, picked = self._picked(name, splits)
        return [data.ids[i] for i in picked], [data.labels[i] for i in picked]

    def texts(self, name: str, splits: Mapping[str, Any]) -> list[str] | None:
        """The texts of the rows `rows` gives (None when the split keeps none)."""
        data, picked = self._picked(name, splits)
        return None if getattr(data, "texts", None) is None else [data.texts[i] for i in picked]

    def _picked(self, name: str, splits: Mapping[str, Any]) -> tuple[Any, list[int]]:
        if name == "heads":
            return splits[HEADS_SPLIT], sample(len(splits[HEADS_SPLIT].ids), self.heads_samples, self.settings.seed)
        data, longest = splits[self.split], self.settings.max_words
        if longest is None:
            return data, sample(len(data.ids), self.samples, self.settings.seed)
        short = [i for i, row in enumerate(data.ids) if len(row) - 1 <= longest]  # [CLS] is not a word
        if not short:
            raise ConfigError(
                f"analysis.max_words={longest}: none of the {len(data.ids)} {self.split} texts has {longest} words "
                "or fewer: raise it, or analysis.max_words=null for every text"
            )
        size = self.samples if self.settings.samples is not None else min(self.samples, len(short))
        size = sample_size(size, len(short), "analysis.samples", f"{self.split} (texts of <= {longest} words)")
        return data, [short[i] for i in sample(len(short), size, self.settings.seed)]


def analysis_settings(values: Mapping[str, Any] | AnalysisConfig | None) -> AnalysisConfig:
    """`values` (a config node, a dict, or settings already) as checked AnalysisConfig settings."""
    if isinstance(values, AnalysisConfig):
        return values
    plain: dict[str, Any] = {
        key: (list(v) if isinstance(v, Sequence) and not isinstance(v, str) else v) for key, v in (values or {}).items()
    }
    check_analysis_settings(plain)
    return AnalysisConfig(**plain)


def plan(names: Any, settings: Any, sizes: Mapping[str, int], split: str, prefix: str = "analysis.") -> Plan:
    """Check the analyses' inputs against the data before any work: known `names`, valid `settings`, and sample
    sizes no larger than the splits (`sizes`: split -> rows). `split`: the faithfulness texts' split when the
    settings give none. A ConfigError names the bad value and the fix."""
    chosen = analysis_settings(settings)
    out = Plan(names=check_analyses(names), settings=chosen, split=chosen.split or split)
    if "faithfulness" in out.names:
        if out.split not in sizes:
            raise ConfigError(f"{prefix}split={out.split}: the data has no such split (splits: {', '.join(sizes)})")
        out.samples = sample_size(chosen.samples, sizes[out.split], f"{prefix}samples", out.split)
    if "heads" in out.names:
        if HEADS_SPLIT not in sizes:
            raise ConfigError("analyses=heads scores heads on the validation split, which the data lacks: give it one")
        out.heads_samples = sample_size(chosen.heads_samples, sizes[HEADS_SPLIT], f"{prefix}heads_samples", HEADS_SPLIT)
    return out


def sample(available: int, size: int, seed: int) -> list[int]:
    """`size` of `available` row indices, drawn without replacement with `seed`, in order."""
    if size >= available:
        return list(range(available))
    return sorted(np.random.default_rng(seed).choice(available, size=size, replace=False).tolist())
