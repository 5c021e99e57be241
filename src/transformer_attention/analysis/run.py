"""Run what a plan (plan.py) says on a model: head importance (heads.py) and the faithfulness of the token
attributions (faithfulness.py) on the plan's seeded samples (`run_analyses`), and each text's attributions for
predict.py's pages (`explain_rows`). What they found is an `Analysis`; write.py draws and writes it."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from tokenizers import Tokenizer

from ..data.labels import names_or_ids
from ..errors import ConfigError
from ..model.classifier import TransformerClassifier
from ..module import evaluating
from .attributions import float64_capable
from .faithfulness import Explained, Faithfulness, explain_texts, faithfulness
from .heads import HeadImportance, head_importance
from .plan import Plan, analysis_settings
from .plausibility import rationales_of
from .removal import REMOVAL_PHRASES, replacement
from .settings import AnalysisConfig


@dataclass
class Analysis:
    """What the analyses found (None: not run), how long each took, and the settings they ran with."""

    heads: HeadImportance | None = None
    faithfulness: Faithfulness | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)


def run_analyses(
    net: TransformerClassifier,
    chosen: Plan,
    *,
    splits: Mapping[str, Any],
    tokenizer: Tokenizer,
    progress: bool | None = None,
    label_names: Sequence[str] | None = None,
    deciding_words: Callable[[str], Sequence[bool] | None] | None = None,
) -> Analysis:
    """Run `chosen` (from `plan`) on `net`, a TransformerClassifier. `splits`: split name -> its rows (an
    EncodedDataset: `.ids`, `.labels`). Samples are drawn with the settings' seed, so a rerun scores the same rows.
    `label_names`: the classes' names, for a `target` named by class; `deciding_words` (text -> one bool per
    whitespace word, or None when unknown: the toy set's, or the data's rationales) adds each method's plausibility."""
    s, net = chosen.settings, float64_capable(net)
    result = Analysis(settings=asdict(s))
    if "faithfulness" in chosen.names:  # a class that is not there fails before any work
        texts, labels = chosen.rows("faithfulness", splits)
        targets = target_classes(s.target, labels, label_names, net.head.out_features, len(texts))
    with evaluating(net):  # one eval mode for all the passes below, not one set and restored a pass
        if "heads" in chosen.names:
            start = time.perf_counter()
            rows, labels = chosen.rows("heads", splits)
            result.heads = head_importance(net, rows, labels, batch_size=s.batch_size, progress=progress)
            result.seconds["heads"] = time.perf_counter() - start
        if "faithfulness" in chosen.names:
            start = time.perf_counter()
            kind, mask_id = replacement(s.removal, tokenizer)
            known = chosen.texts("faithfulness", splits) if deciding_words else None
            rationales = (
                None
                if known is None or deciding_words is None
                else rationales_of(known, texts, deciding_words, tokenizer)
            )
            tokens = [[tokenizer.id_to_token(int(t)) or "[UNK]" for t in row] for row in texts]
            result.faithfulness = faithfulness(
                net,
                texts,
                tokens=tokens,
                split=chosen.split,
                removal=kind,
                mask_id=mask_id,
                progress=progress,
                targets=targets,
                rationales=rationales,
                normalized=s.normalized,
                **explaining(s),
            )
            result.seconds["faithfulness"] = time.perf_counter() - start
    return result


def explaining(s: AnalysisConfig) -> dict[str, Any]:
    """The settings `explain_texts` takes from the analyses' settings."""
    return {"k": s.k, "methods": s.methods, "ig_steps": s.ig_steps, "seed": s.seed, "batch_size": s.batch_size}


def target_classes(
    target: str, labels: Sequence[int] | None, names: Sequence[str] | None, num_classes: int, n_rows: int
) -> list[int] | None:
    """The class each of `n_rows` rows' attributions explain: None for "predicted" (the model's), the rows' `labels`
    for "true", or one class by its name in `names` (or its id). A ConfigError names a class that is not there."""
    if target == "predicted":
        return None
    if target == "true":
        if labels is None:
            raise ConfigError("analysis.target=true: these texts have no labels; use predicted or a class name")
        return [int(y) for y in labels]
    known = names_or_ids(names, num_classes)
    if target not in known:
        raise ConfigError(
            f"analysis.target={target!r} is not a class: use predicted, true or one of {', '.join(known)}"
        )
    return [known.index(target)] * n_rows


def explain_rows(
    net: TransformerClassifier,
    rows: Sequence[Sequence[int]],
    tokenizer: Tokenizer,
    settings: Any,
    label_names: Sequence[str] | None = None,
) -> tuple[list[Explained | None], str]:
    """Each row's attributions by the settings' `methods` (null: every registered one) and their ERASER scores on
    it (None for a row with no word), and how words were removed ("replaced by [MASK]" or "deleted"): what
    predict.py's attention pages show. The class explained: the settings' `target` (predicted, or a class named in
    `label_names`)."""
    s, net = analysis_settings(settings), float64_capable(net)
    kind, mask_id = replacement(s.removal, tokenizer)
    keep = [i for i, row in enumerate(rows) if len(row) > 1]
    targets = target_classes(s.target, None, label_names, net.head.out_features, len(keep))
    explained, _ = explain_texts(net, [rows[i] for i in keep], mask_id=mask_id, targets=targets, **explaining(s))
    out: list[Explained | None] = [None] * len(rows)
    for i, e in zip(keep, explained, strict=True):
        out[i] = e
    return out, REMOVAL_PHRASES[kind]
