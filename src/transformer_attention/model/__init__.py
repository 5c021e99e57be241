"""The from-scratch Transformer encoder (imports torch only)."""

from .attention import (
    ATTENTION_IMPLS,
    MultiHeadAttention,
    causal_mask,
    chunked_attention,
    padding_mask,
    scaled_dot_product_attention,
)
from .classifier import ClassifierOutput, TransformerClassifier
from .dropout import Dropout
from .encoder import TransformerEncoder, TransformerEncoderLayer
from .positional import LearnedPositionalEncoding, SinusoidalPositionalEncoding

__all__ = [
    "ATTENTION_IMPLS",
    "ClassifierOutput",
    "Dropout",
    "LearnedPositionalEncoding",
    "MultiHeadAttention",
    "SinusoidalPositionalEncoding",
    "TransformerClassifier",
    "TransformerEncoder",
    "TransformerEncoderLayer",
    "causal_mask",
    "chunked_attention",
    "padding_mask",
    "scaled_dot_product_attention",
]
