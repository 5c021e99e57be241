"""The from-scratch Transformer encoder (imports torch only).

Names load on first use (PEP 562), so `model.config` alone, what a config check needs, imports no torch.
The same names are imported for type checkers and IDEs under TYPE_CHECKING.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .config import ATTENTION_IMPLS, EncoderConfig

if TYPE_CHECKING:
    from .attention import MultiHeadAttention, scaled_dot_product_attention  # noqa: F401
    from .classifier import ClassifierOutput, TransformerClassifier  # noqa: F401
    from .encoder import TransformerEncoder, TransformerEncoderLayer  # noqa: F401
    from .fast_attention import chunked_attention, sdpa_attention  # noqa: F401
    from .masks import causal_mask, padding_mask  # noqa: F401
    from .positional import LearnedPositionalEncoding, SinusoidalPositionalEncoding  # noqa: F401

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
