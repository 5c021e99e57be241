"""Data: the toy set, Hugging Face review datasets, tokenizer, batches (knows nothing of the model)."""

from .datamodule import EncodedDataset, ReviewDataModule, collate
from .tokenizer import CLS_ID, PAD_ID, UNK_ID, load_tokenizer, save_tokenizer, train_tokenizer
from .toy import make_toy_splits

__all__ = [
    "CLS_ID",
    "PAD_ID",
    "UNK_ID",
    "EncodedDataset",
    "ReviewDataModule",
    "collate",
    "load_tokenizer",
    "make_toy_splits",
    "save_tokenizer",
    "train_tokenizer",
]
