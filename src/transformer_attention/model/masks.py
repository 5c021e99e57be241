"""Attention masks: boolean, True means "take part in attention" everywhere in this project.

Shapes: B batch, H heads, T tokens, Tq query tokens, Tk key tokens.
"""

from __future__ import annotations

from typing import overload

import torch


def padding_mask(ids: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """(B, T) bool mask, True where `ids` is a real token (not `pad_id`)."""
    return ids != pad_id


def causal_mask(T: int, device: torch.device | None = None) -> torch.Tensor:
    """(T, T) bool mask, lower triangle True: query i sees keys 0..i."""
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


@overload
def expand_mask(mask: None, B: int, Tq: int, Tk: int) -> None: ...
@overload
def expand_mask(mask: torch.Tensor, B: int, Tq: int, Tk: int) -> torch.Tensor: ...
@overload
def expand_mask(mask: torch.Tensor | None, B: int, Tq: int, Tk: int) -> torch.Tensor | None: ...
def expand_mask(mask: torch.Tensor | None, B: int, Tq: int, Tk: int) -> torch.Tensor | None:
    """Bring a (B, Tk), (B, Tq, Tk), (Tq, Tk) or (B, H|1, Tq, Tk) mask to a 4-d broadcastable shape."""
    if mask is None:
        return None
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor (True = attend), got dtype {mask.dtype}")
    shape = tuple(mask.shape)
    # a 2-d mask is read as (B, Tk) padding when it fits; when B == Tq pass a shared
    # (Tq, Tk) mask as (1, Tq, Tk) to say which one it is
    if mask.dim() == 2 and shape == (B, Tk):
        return mask[:, None, None, :]  # (B, 1, 1, Tk)
    if mask.dim() == 2 and shape == (Tq, Tk):
        return mask[None, None, :, :]  # (1, 1, Tq, Tk)
    if mask.dim() == 3 and shape[1:] == (Tq, Tk) and shape[0] in (1, B):
        return mask[:, None, :, :]  # (B, 1, Tq, Tk)
    if mask.dim() == 4 and all(m in (1, n) for m, n in zip(shape, (B, shape[1], Tq, Tk), strict=True)):
        return mask  # already broadcastable to (B, H, Tq, Tk)
    raise ValueError(
        f"mask of shape {shape} does not fit attention with B={B}, Tq={Tq}, Tk={Tk}: expected "
        f"(B, Tk)={(B, Tk)}, (B, Tq, Tk)={(B, Tq, Tk)}, (Tq, Tk)={(Tq, Tk)} or (B, H, Tq, Tk)"
    )


def dead_rows(mask4: torch.Tensor) -> torch.Tensor:
    """(B|1, H|1, Tq|1, 1) True where a query of an expanded mask may attend to no key at all."""
    return ~mask4.any(dim=-1, keepdim=True)
