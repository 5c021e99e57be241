"""The encoder classifier's settings, defined once: `EncoderConfig`, and what its training loss adds to plain
cross-entropy, `LossConfig` (the regularisers are in regularizers.py).

`TransformerClassifier` takes it whole, `ClassifierModule` passes it through (so every field is a
checkpoint hyperparameter and a TensorBoard HPARAMS column), and it is the structured schema of
Hydra's `conf/model/` group (so an unknown key or a wrong type fails when the config is composed).
Standard library only: a config is checked in about a second, before torch is imported.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Optional

from ..checks import closest, is_number, is_whole

ATTENTION_IMPLS = ("math", "sdpa")
# the one default kernel, of EncoderConfig and of MultiHeadAttention alike: torch's fused kernel is the faster
# step at every size measured (docs/performance.md), and tested equal to the math
DEFAULT_ATTENTION_IMPL = "sdpa"
POOLINGS = ("cls", "mean")
POSITIONALS = ("sinusoidal", "learned")
ACTIVATIONS = ("relu", "gelu")
# the whole-number settings: (the lowest value, an example for the message, what the lowest value means)
WHOLE_NUMBERS = {
    **{key: (1, 2, "") for key in ("d_model", "num_heads", "num_layers", "dim_feedforward", "max_len")},
    "ngram_buckets": (0, 131072, " (0: no word n-grams)"),
    "ngram_max": (2, 2, " (2: word pairs; 3: pairs and triples)"),
    "nb_ngram_max": (0, 3, " (0: no naive-Bayes n-gram evidence)"),
    "nb_buckets": (1, 4194304, ""),
}


@dataclass
class EncoderConfig:
    """Sizes and choices of the encoder classifier (vocab_size, num_classes and pad_id come from the data)."""

    d_model: int = 64
    num_heads: int = 4  # must divide d_model
    num_layers: int = 2
    dim_feedforward: int = 128
    max_len: int = 512  # positional table size: the longest input the model takes
    dropout: float = 0.1  # on the residual, feed-forward and positional paths
    # on the attention weights (None: = dropout); 0 keeps accuracy and is faster (docs/performance.md)
    attention_dropout: Optional[float] = 0.0  # noqa: UP045 - OmegaConf 2.3 reads Optional, not `float | None`
    attention_impl: str = DEFAULT_ATTENTION_IMPL  # math | sdpa: the same results; sdpa is faster
    pooling: str = "cls"  # cls: the [CLS] token; mean: the average of the real tokens
    norm_first: bool = False  # False: post-norm (the original Transformer); True: pre-norm
    activation: str = "relu"  # relu | gelu
    positional: str = "sinusoidal"  # sinusoidal | learned
    # > 0: each token's input also adds a vector of each word n-gram it ends (n = 2 .. ngram_max), from a table of
    # this many rows indexed by a hash of the n-gram: fastText's word n-grams (model/embedding.py); 0: words alone
    ngram_buckets: int = 0
    ngram_max: int = 2  # 2: word pairs; 3: pairs and triples
    # > 0: the logits add the naive-Bayes evidence of the text's n-grams, n = 1 .. nb_ngram_max, each ratio counted
    # on the training split, its weight learned (model/evidence.py); hashed into nb_buckets rows
    nb_ngram_max: int = 0
    nb_buckets: int = 4194304

    def __post_init__(self) -> None:
        check_encoder(asdict(self))

    @property
    def attention_p(self) -> float:
        """The dropout probability on the attention weights."""
        return self.dropout if self.attention_dropout is None else self.attention_dropout


@dataclass
class LossConfig:
    """The training loss's settings: `ModelConfig` (the schema of `conf/model/`) is made of it and EncoderConfig,
    and `ClassifierModule` takes its fields as keyword arguments and keeps them as hyperparameters."""

    label_smoothing: float = 0.0  # cross-entropy's: this share of the target spread evenly over the classes
    word_dropout: float = 0.0  # in training, each real token leaves the attention mask with this probability
    adversarial_eps: float = 0.0  # > 0: the loss also on embeddings moved eps along its gradient (Miyato 2017)
    # with the naive-Bayes term (nb_ngram_max > 0): the loss also adds this times the loss of each of the logits'
    # two terms alone, the encoder's and the term's, so that each learns to classify and neither leans on the other
    nb_part_loss: float = 0.0


LOSS_FIELDS = tuple(f.name for f in fields(LossConfig))


def encoder_fields() -> tuple[str, ...]:
    return tuple(f.name for f in fields(EncoderConfig))


def check_encoder(values: Mapping[str, Any], prefix: str = "") -> None:
    """Raise ValueError on the first setting that cannot work; the message names `prefix + key`, the
    value and the fix. The model's constructor and the config pre-check (prefix "model.") call it."""
    for key, (low, example, meaning) in WHOLE_NUMBERS.items():
        value = values.get(key, low)
        if not is_whole(value, low):
            raise ValueError(
                f"{prefix}{key}={value!r} must be a whole number >= {low}{meaning}: e.g. {prefix}{key}={example}"
            )
    d, h = values.get("d_model"), values.get("num_heads")
    if d is not None and h is not None and d % h != 0:
        near = min((k for k in range(1, d + 1) if d % k == 0), key=lambda k: (abs(k - h), k))
        raise ValueError(
            f"{prefix}d_model={d} is not divisible by {prefix}num_heads={h}: pick {prefix}num_heads among "
            f"the divisors of {prefix}d_model (e.g. {prefix}num_heads={near})"
        )
    for key in ("dropout", "attention_dropout"):
        value = values.get(key)
        if value is not None and (not is_number(value) or not 0 <= value < 1):
            raise ValueError(f"{prefix}{key}={value!r} must be a number in [0, 1): e.g. {prefix}{key}=0.1")
    check_ngram_table(values, prefix)
    choices = {"attention_impl": ATTENTION_IMPLS, "pooling": POOLINGS, "positional": POSITIONALS}
    for key, allowed in {**choices, "activation": ACTIVATIONS}.items():
        choice = values.get(key, allowed[0])
        if choice not in allowed:
            similar = closest(choice, allowed)
            fix = f"did you mean {prefix}{key}={similar}?" if similar else f"use {prefix}{key}={allowed[0]}"
            raise ValueError(f"{prefix}{key}={choice!r} is not one of {', '.join(allowed)}: {fix}")


TABLE_SHARE = 8  # an n-gram table may take up to 1/8 of the memory: training holds it 4 times (weights, gradients,
# AdamW's two moments), so at most half the memory goes to it


def memory_bytes() -> int | None:
    """This machine's physical memory in bytes (None where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def check_ngram_table(values: Mapping[str, Any], prefix: str = "") -> None:
    """Refuse an n-gram table (`ngram_buckets` x `d_model` float32) over 1/TABLE_SHARE of the machine's memory,
    before it is allocated, with its size in the message."""
    buckets, d = values.get("ngram_buckets"), values.get("d_model", 64)
    memory = memory_bytes()
    if not (is_whole(buckets, 1) and is_whole(d, 1)) or memory is None or buckets * d * 4 * TABLE_SHARE <= memory:
        return
    fits = 1 << max(0, (memory // (TABLE_SHARE * 4 * d)).bit_length() - 1)  # the largest power of two that fits
    raise ValueError(
        f"{prefix}ngram_buckets={buckets} makes a {buckets * d * 4 / 1e9:.1f} GB n-gram table ({buckets} x "
        f"{prefix}d_model={d} float32), more than 1/{TABLE_SHARE} of this machine's {memory / 1e9:.1f} GB of memory "
        f"(training holds it 4 times: weights, gradients, AdamW's two moments): e.g. "
        f"{prefix}ngram_buckets={min(fits, WHOLE_NUMBERS['ngram_buckets'][1])}"
    )
