"""Data: the toy set, Hugging Face review datasets, tokenizer, batches (knows nothing of the model)."""

from .datamodule import EncodedDataset, ReviewDataModule, collate
from .pii import PII_TOKENS, scrub_pii
from .sampler import BucketBatchSampler
from .sources import DataError
from .tokenizer import CLS_ID, PAD_ID, UNK_ID, load_tokenizer, save_tokenizer, train_tokenizer
from .toy import make_toy_splits

__all__ = [
    "CLS_ID",
    "PAD_ID",
    "PII_TOKENS",
    "UNK_ID",
    "BucketBatchSampler",
    "DataError",
    "EncodedDataset",
    "ReviewDataModule",
    "collate",
    "load_tokenizer",
    "make_toy_splits",
    "save_tokenizer",
    "scrub_pii",
    "train_tokenizer",
]
