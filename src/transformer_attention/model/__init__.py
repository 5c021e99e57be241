"""The from-scratch Transformer encoder (imports torch only).

Names load on first use (PEP 562), so `model.config` alone, what a config check needs, imports no torch.
"""

from importlib import import_module
from typing import Any

from .config import ATTENTION_IMPLS, EncoderConfig

_WHERE = {
    "MultiHeadAttention": "attention",
    "causal_mask": "masks",
    "padding_mask": "masks",
    "scaled_dot_product_attention": "attention",
    "chunked_attention": "fast_attention",
    "sdpa_attention": "fast_attention",
    "ClassifierOutput": "classifier",
    "TransformerClassifier": "classifier",
    "TransformerEncoder": "encoder",
    "TransformerEncoderLayer": "encoder",
    "LearnedPositionalEncoding": "positional",
    "SinusoidalPositionalEncoding": "positional",
}

__all__ = ["ATTENTION_IMPLS", "EncoderConfig", *sorted(_WHERE)]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{_WHERE[name]}", __name__), name)
