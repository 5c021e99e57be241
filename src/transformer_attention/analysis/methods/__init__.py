"""The registry of explanations: every way this project scores the words of a text, one `Method` per file of
this package, registered when the file is imported (`register`). The faithfulness, agreement and plausibility
tables, the TensorBoard text view, predict.py's pages and evaluate.py read it (`methods()`), so a new method is
one new file here and nothing else (docs/analysis.md shows one). Shapes: B a batch, T its longest row, C classes.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from ..passes import Passes

if TYPE_CHECKING:
    from ...model.classifier import TransformerClassifier

# What the text views shade a review by unless told otherwise: of the methods that read the encoder's own parts
# (attention and the decompositions), the most faithful on the recipes' checkpoints (docs/analysis.md), and signed.
TEXT_METHOD = "decompx"


@dataclass(frozen=True)
class Options:
    """What every method may read besides the batch: Integrated Gradients' steps, the seed of a random ranking,
    the id that replaces a removed word (None: it is deleted), rows per forward pass, and the batch's rows'
    positions among all the rows explained (`index`: a seed per row, whatever the batching). One set for all the
    methods: the only setting a method has of its own is Integrated Gradients' number of steps."""

    ig_steps: int = 32
    seed: int = 0
    mask_id: int | None = None
    batch_size: int = 256
    index: tuple[int, ...] = ()


@dataclass
class Explanation:
    """A batch explained: one score per token `scores` (B, T) (padding: 0), and `extra`: per-row numbers a method
    reports about itself (e.g. Integrated Gradients' completeness error, (B,))."""

    scores: torch.Tensor
    extra: dict[str, torch.Tensor] = field(default_factory=dict)


# net (a TransformerClassifier), ids and mask (B, T), target (B,), options -> the batch explained
Explain = Callable[["TransformerClassifier", torch.Tensor, torch.Tensor, torch.Tensor, Options], Explanation]


@dataclass(frozen=True)
class Method:
    """An explanation: its `name` (config and JSON key), `label` (tables and pages), whether its scores are
    `signed` (towards the class explained, or against it) or only sizes, `explain(net, ids, mask, target,
    options)` (ids, mask (B, T), target (B,) long -> Explanation, in eval mode, dropout off), `passes(length,
    classes, options)`: the model work of one row of `length` tokens, in forward and backward passes (by default,
    each row forward once), `description`: one line for users, what a word's number means and its unit, and
    `by_default`: whether `analysis.methods=null` (every method) includes it; a method whose cost grows faster
    than its passes say (decompx_paper: with the cube of the length) runs only when named."""

    name: str
    label: str
    signed: bool
    explain: Explain
    passes: Callable[[int, int, Options], Passes] = lambda length, classes, options: Passes(forward=1)
    description: str = ""
    by_default: bool = True


METHODS: dict[str, Method] = {}
ORDER = (  # the tables' order; a method not named here comes after, in the order it was registered
    "attention", "rollout", "attention_norm", "attention_norm_rollout", "alti", "value_zeroing", "decompx",
    "decompx_paper", "attnlrp", "grad_x_input", "integrated_gradients", "leave_one_out", "random",
)  # fmt: skip

# What a word's number means, and its unit, for a method registered without a description of its own.
DESCRIPTIONS = {
    "attention": "the last layer's attention weight (0 to 1) from the pooled row to each word, mean of the heads: "
    "where the classifier looks, not which way it pushes",
    "rollout": "each word's share (0 to 1) of the pooled row: attention rolled out through every layer, residual "
    "path included",
    "attention_norm": "the last layer's attention weight times the length of what each word's value moves (in the "
    "hidden state's units), mean of the heads, from the pooled row",
    "attention_norm_rollout": "each word's share (0 to 1) of the pooled row: attention x norm rolled out through "
    "every layer",
    "alti": "each word's share (0 to 1) of the pooled row: how much each token's part shapes every attention "
    "block's output (L1 distance), rolled out through the layers",
    "value_zeroing": "each word's share (0 to 1) of the pooled row: how far (1 - cosine) each layer's outputs move "
    "when the word's values are zeroed, rolled out through the layers",
    "decompx": "each word's signed share of the explained class's logit (in logits), propagated exactly through "
    "every layer; biases and positions kept apart",
    "decompx_paper": "each word's signed share of the explained class's logit (in logits), as the DecompX paper "
    "defines it: every bias shared among the words (AbsDot), positions counted with their words",
    "attnlrp": "each word's signed relevance for the explained class's logit (in logits), by AttnLRP's rules in "
    "one backward pass",
    "grad_x_input": "each word's embedding times the logit's gradient: a first-order, signed estimate of its "
    "effect on the explained class's logit (in logits)",
    "integrated_gradients": "each word's signed share of how far the explained class's logit is from a text of "
    "[PAD] words (in logits); the shares sum to that distance",
    "leave_one_out": "how much the explained class's probability (0 to 1) drops when that one word is removed; "
    "negative: it rises",
    "random": "a random ranking (0 to 1): the floor any method should beat",
}


def register(method: Method) -> Method:
    """Add `method` to the registry (a second method of the same name replaces the first; one without a
    description takes its name's from DESCRIPTIONS); returns it as registered."""
    if not method.description and method.name in DESCRIPTIONS:
        method = dataclasses.replace(method, description=DESCRIPTIONS[method.name])
    METHODS[method.name] = method
    return method


def unregister(name: str) -> None:
    """Take the method `name` out of the registry (tests that register one of their own)."""
    METHODS.pop(name, None)


def methods() -> dict[str, Method]:
    """Every registered method by name, in the tables' order: this package's files all imported first."""
    _load()
    rank = {name: i for i, name in enumerate(ORDER)}
    return dict(sorted(METHODS.items(), key=lambda item: rank.get(item[0], len(ORDER))))


def names() -> tuple[str, ...]:
    """The registered methods' names, in the tables' order."""
    return tuple(methods())


def default_names() -> tuple[str, ...]:
    """The methods `analysis.methods=null` runs: every one but those that run only when named."""
    return tuple(name for name, m in methods().items() if m.by_default)


def labels() -> dict[str, str]:
    """Each method's label by name: how tables and pages name it."""
    return {name: m.label for name, m in methods().items()}


def descriptions() -> dict[str, str]:
    """Each method's one-line description by name: what a word's number means, and its unit."""
    return {name: m.description for name, m in methods().items()}


def signed() -> dict[str, bool]:
    """Whether each method's scores are signed (towards the class explained, or against it), by name."""
    return {name: m.signed for name, m in methods().items()}


def check_methods(chosen: Sequence[str]) -> list[str]:
    """`chosen` as a list of registered names; a ValueError names an unknown one and lists the known."""
    known = methods()
    unknown = [m for m in chosen if m not in known]
    if unknown:
        raise ValueError(f"unknown explanation methods {unknown}: expected some of {', '.join(known)}")
    return list(dict.fromkeys(chosen))


_LOADED = False


def _load() -> None:
    """Import every module of this package once: each registers its method."""
    global _LOADED
    if _LOADED:
        return
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
    _LOADED = True
