"""What the decompositions' public functions take, checked before any work: the classifier itself (not the
Lightning module around it, nor a masked language model's untrained head) and ids it can read. Each refusal is
one line naming the argument, the value and the fix, as the model's own checks are."""

from __future__ import annotations

from typing import Any

import torch

from ...model.classifier import TransformerClassifier
from ...module import EncoderModule

NO_HEAD = (
    "{what} is a masked language model's encoder: its classification head was never trained, so there is no "
    "decision to take apart; fine-tune it first (python train.py model.init_from=<its .ckpt>) and pass that "
    "ClassifierModule's .net"
)


def checked(net: Any, input_ids: Any, attention_mask: Any) -> torch.Tensor:
    """The (B, T) bool mask of `input_ids` (None: from the model's pad id), once `net`, the ids and the mask are
    known to work; a TypeError or ValueError otherwise."""
    if not getattr(net, "predicts_labels", True):  # a masked language model, or its encoder
        raise ValueError(NO_HEAD.format(what=f"net={type(net).__name__}"))
    if isinstance(net, EncoderModule):
        raise TypeError(f"net={type(net).__name__}: a Lightning module, not the classifier inside it: pass module.net")
    if not isinstance(net, TransformerClassifier):
        raise TypeError(
            f"net={type(net).__name__}: expected a TransformerClassifier (a ClassifierModule's .net), e.g. "
            "decompx(module.net, input_ids)"
        )
    if not isinstance(input_ids, torch.Tensor) or input_ids.is_floating_point() or input_ids.is_complex():
        kind = input_ids.dtype if isinstance(input_ids, torch.Tensor) else type(input_ids).__name__
        raise TypeError(f"input_ids of {kind}: expected token ids as an integer tensor (B, T), e.g. ids.long()")
    shape = tuple(input_ids.shape)
    if input_ids.dim() != 2:
        fix = "input_ids[None] for one text" if input_ids.dim() == 1 else "one row of token ids per text"
        raise ValueError(f"input_ids of shape {shape}: expected (B, T), {fix}")
    if input_ids.numel() == 0:
        raise ValueError(f"input_ids of shape {shape} holds no tokens: give every row at least its first token")
    limit = net.config.max_len
    if shape[1] > limit:
        raise ValueError(
            f"input_ids of {shape[1]} tokens a row: longer than the model's max_len={limit}; cut the rows to "
            f"{limit} tokens (input_ids[:, :{limit}])"
        )
    vocab = net.embedding.num_embeddings
    low, high = int(input_ids.min()), int(input_ids.max())
    if low < 0 or high >= vocab:
        bad = low if low < 0 else high
        raise ValueError(
            f"input_ids holds {bad}, outside the model's vocabulary 0..{vocab - 1}: encode the texts with the "
            "model's own tokenizer"
        )
    if attention_mask is None:
        return input_ids != net.pad_id
    if not isinstance(attention_mask, torch.Tensor) or tuple(attention_mask.shape) != shape:
        got = tuple(attention_mask.shape) if isinstance(attention_mask, torch.Tensor) else type(attention_mask).__name__
        raise ValueError(f"attention_mask of shape {got}: expected input_ids' {shape} (True = a real token), or None")
    return attention_mask.bool()
