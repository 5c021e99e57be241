"""transformer-attention: a from-scratch Transformer encoder classifier, trained with Lightning."""

__version__ = "0.1.0"
