"""How a page stores its maps: each weight as 16 bits of its square root, base64 (5.6 MB, not 30, for 512 tokens x
2 layers x 4 heads), within 1.5e-5 of it and 3 significant digits down to 1e-4; the page's state.js decodes it."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import numpy as np

from .rollout import attention_rollout

STEPS = 65535  # the largest 16-bit value: a weight of 1


def pack(maps: np.ndarray) -> dict[str, Any]:
    """`maps` (values in [0, 1]) as {"shape", "sqrt16"}: round(sqrt(w) * STEPS), 16-bit little-endian, base64
    without its `=` padding (no `=` that a scan for `src=` could trip on)."""
    a = np.asarray(maps, dtype=np.float64)
    if a.size and (np.nanmin(a) < -1e-6 or np.nanmax(a) > 1 + 1e-6 or np.isnan(a).any()):
        raise ValueError(f"pack stores weights in [0, 1], got values from {np.nanmin(a)} to {np.nanmax(a)}")
    codes = np.rint(np.sqrt(np.clip(a, 0.0, 1.0)) * STEPS).astype("<u2")
    return {"shape": list(a.shape), "sqrt16": base64.b64encode(codes.tobytes()).decode("ascii").rstrip("=")}


def unpack(packed: dict[str, Any]) -> np.ndarray:
    """The float64 array `pack` stored (each value within 1.5e-5 of the one packed)."""
    text = packed["sqrt16"]
    codes = np.frombuffer(base64.b64decode(text + "=" * (-len(text) % 4)), dtype="<u2")
    return ((codes / STEPS) ** 2).reshape(packed["shape"])


COMPUTE = "compute"  # in place of a rollout: the page computes it from the maps it holds (a text shown whole)


def norm_data(weights: list[np.ndarray], norms: Sequence[Any], shares: dict[str, Any], *, cut: bool) -> dict:
    """The norm-weighted maps as a page stores them: for a text shown whole, the lengths ||f_h(x_j)|| alone, (L, H,
    n), which the page multiplies by the weights (each map is weight x length); else the shares, packed. `weights`:
    (H, n, n) per layer as shown; `shares`: `norm_maps`'s."""
    n = weights[0].shape[-1]
    raw = [np.asarray(m, dtype=np.float64)[..., :n, :n] for m in norms]  # (H, n, n) each
    lengths = [m.sum(axis=-2) / np.clip(w.sum(axis=-2), 1e-30, None) for m, w in zip(raw, weights, strict=True)]
    rollout = shares["rollout"]
    if not cut and all(
        np.allclose(m, w * k[:, None, :], rtol=1e-4, atol=1e-6 * float(m.max(initial=0.0)))
        for m, w, k in zip(raw, weights, lengths, strict=True)
    ):
        stored = [[[float(f"{v:.6g}") for v in head] for head in k] for k in lengths]
        return {"lengths": stored, "rollout": None if rollout is None else COMPUTE}
    return {"layers": pack(np.stack(shares["layers"])), "rollout": None if rollout is None else pack(rollout)}


def unpacked(data: dict[str, Any]) -> dict[str, Any]:
    """A page's data as its script reads it: the maps as (L, H, n, n) arrays, the rollouts and norm shares computed
    where the page computes them, and both kinds in `kinds` (with norm maps)."""
    out = dict(data)
    out["layers"] = unpack(data["layers"])
    out["rollout"] = _rollout(data["rollout"], out["layers"], data["residual"])
    if "kinds" in data:
        norm = dict(data["kinds"]["norm"])
        if "lengths" in norm:
            raw = out["layers"] * np.asarray(norm["lengths"])[:, :, None, :]  # (L, H, n, n)
            norm["layers"] = raw / np.clip(raw.sum(axis=-1, keepdims=True), 1e-30, None)
        else:
            norm["layers"] = unpack(norm["layers"])
        norm["rollout"] = _rollout(norm["rollout"], norm["layers"], data["residual"])
        weight = {"layers": out["layers"], "rollout": out["rollout"], "series": data["text"]["series"]}
        out["kinds"] = {"weight": weight, "norm": norm}
    return out


def _rollout(stored: Any, layers: np.ndarray, residual: float) -> np.ndarray | None:
    if stored is None:
        return None
    return attention_rollout(list(layers), residual=residual) if stored == COMPUTE else unpack(stored)
