"""The analyses' names and settings, defined once: `AnalysisConfig` is the schema of `conf/analysis/` (train.py's
end-of-fit analysis, `evaluate.py analyses=...` and predict.py's pages all read it), and `check_analysis_settings`
the rules its values must pass. Standard library only: a config is checked before torch is imported."""

from __future__ import annotations

import pkgutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Optional  # noqa: UP035 - OmegaConf 2.3 reads typing's List and Optional

from ..checks import Rule, check_rules, closest, is_number, whole
from ..errors import ConfigError

ANALYSES = ("heads", "faithfulness")
REMOVAL_CHOICES = ("auto", "mask", "delete")  # how removed words go (removal.py)
SPLITS = ("validation", "test")
DEFAULT_SAMPLES = 100  # faithfulness texts when `samples` is null (all of a smaller split)


@dataclass
class AnalysisConfig:
    """How the analyses run: which texts, how many, and how a token is removed."""

    samples: Optional[int] = None  # noqa: UP045 - faithfulness: a seeded sample of this many texts (null: 100, or all)
    heads_samples: Optional[int] = None  # noqa: UP045 - head importance: this many validation rows (null: all)
    split: Optional[str] = None  # noqa: UP045 - faithfulness texts: null = validation in train.py, test in evaluate.py
    k: List[float] = field(default_factory=lambda: [10.0, 20.0, 50.0])  # noqa: UP006 - % of a text's words
    ig_steps: int = 32  # Integrated Gradients: steps from the baseline to the text
    removal: str = "auto"  # auto: [MASK] when the tokenizer has it, else delete | mask | delete
    seed: int = 0  # the sample and the random ranking
    batch_size: int = 256  # rows per forward pass
    target: str = "predicted"  # the class the attributions explain: predicted | true | a class name
    normalized: bool = True  # normalized AOPC: greedy bounds, n (n + 1) passes per text of n <= 64 words
    max_words: Optional[int] = None  # noqa: UP045 - faithfulness: only texts of at most this many words (null: all)
    methods: Optional[List[str]] = None  # noqa: UP006, UP045 - explanation methods to run (null: every one, methods/)


RULES: dict[str, Rule] = {
    "samples": (whole(1, null=True), "a whole number >= 1 (null: all)", 100),
    "heads_samples": (whole(1, null=True), "a whole number >= 1 (null: all)", 100),
    "max_words": (whole(1, null=True), "a whole number >= 1 (null: every text)", 64),
    "ig_steps": (whole(2), "a whole number >= 2", 32),
    "seed": (whole(0), "a whole number >= 0", 0),
    "batch_size": (whole(1), "a whole number >= 1", 256),
    "target": (lambda v: isinstance(v, str) and bool(v), "predicted, true or a class name", "true"),
    "removal": (lambda v: v in REMOVAL_CHOICES, f"one of {', '.join(REMOVAL_CHOICES)}", "auto"),
    "split": (lambda v: v is None or v in SPLITS, "validation or test (null: the task's own)", "test"),
}


def check_names(given: Any, known: Sequence[str], key: str, what: str, in_list: bool = False) -> list[str]:
    """`given` (a name or a list of names) as a list of `known` names, each once; a ConfigError names the first
    other one, the nearest known name (as the key's value, or `in_list`: as an item of its list) and all of them."""
    names = [given] if isinstance(given, str) else given
    if not isinstance(names, Sequence) or not all(isinstance(n, str) for n in names):
        example = f"'{key}=[{','.join(known[:2])}]'"
        raise ConfigError(f"{key}={given!r} must be a name or a list of names: e.g. {example}")
    for name in names:
        if name not in known:
            near = closest(name, known)
            hint = "" if near is None else f"did you mean {near}? " if in_list else f"did you mean {key}={near}? "
            raise ConfigError(f"{key}={name!r} is not {what}: {hint}the choices are {', '.join(known)}")
    return list(dict.fromkeys(names))


def check_analyses(names: Any, key: str = "analyses") -> list[str]:
    """`names` (one name, a list, or None) as a list of known analyses; a ConfigError names an unknown one."""
    return [] if names is None else check_names(names, ANALYSES, key, "an analysis")


def check_analysis_settings(values: dict[str, Any], prefix: str = "analysis.") -> None:
    """The settings' rules (`values`: a plain dict of AnalysisConfig's fields); a ConfigError names the first
    bad one, its value and the fix."""
    check_rules(values, RULES, prefix)
    k = values.get("k", [10])
    if not isinstance(k, Sequence) or isinstance(k, str) or not k:
        raise ConfigError(f"{prefix}k={k!r} must be a list of percentages: e.g. '{prefix}k=[10,20,50]'")
    shown = "[" + ", ".join(f"{v:g}" if is_number(v) else repr(v) for v in k) + "]"
    for value in k:
        if not is_number(value) or not 0 < value < 100:
            raise ConfigError(
                f"{prefix}k={shown}: {f'{value:g}' if is_number(value) else repr(value)} is not a percentage in "
                f"(0, 100), the share of a text's words kept or removed: e.g. '{prefix}k=[10,20,50]'"
            )
    chosen = values.get("methods")
    if chosen is not None:
        check_method_names(chosen, f"{prefix}methods")


def known_methods() -> list[str]:
    """The explanation methods' names, read without importing them (a method's file is named as the method:
    methods/<name>.py), and any registered at run time."""
    folder = Path(__file__).parent / "methods"
    found = [m.name for m in pkgutil.iter_modules([str(folder)]) if not m.name.startswith("_")]
    loaded = sys.modules.get(f"{__package__}.methods")
    return list(dict.fromkeys([*found, *getattr(loaded, "METHODS", {})]))


def check_method_names(chosen: Any, key: str) -> list[str]:
    """`chosen` (a list of method names) checked against `known_methods`; a ConfigError names an unknown one, or an
    empty list (null means all of them; to explain none, the analyses or pages that would are not asked for)."""
    known = known_methods()
    if isinstance(chosen, Sequence) and not isinstance(chosen, str) and not chosen:
        some = ",".join(m for m in ("decompx", "integrated_gradients") if m in known) or known[0]
        raise ConfigError(
            f"{key}=[] names no explanation method: name some, e.g. '{key}=[{some}]', or {key}=null for all of "
            "them (to explain none: no faithfulness analysis; in predict.py, save_attention=png)"
        )
    return check_names(chosen, known, key, "an explanation method", in_list=True)


def sample_size(asked: int | None, available: int, key: str, split: str) -> int:
    """How many of a split's `available` rows an analysis takes: `asked`, all when None (`DEFAULT_SAMPLES` at most
    for key 'samples'); asking for more than the split holds is a ConfigError that names both numbers."""
    if asked is None:
        return min(available, DEFAULT_SAMPLES) if key.endswith(".samples") else available
    if asked > available:
        raise ConfigError(
            f"{key}={asked} is more than the {available} texts of the {split} split: use {key}={available} or fewer "
            f"(null: {'up to ' + str(DEFAULT_SAMPLES) if key.endswith('.samples') else 'all of them'})"
        )
    return asked
