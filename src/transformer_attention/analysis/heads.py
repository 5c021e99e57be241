"""Which heads matter (Michel, Levy & Neubig 2019, "Are Sixteen Heads Really Better than One?"), measured on
labelled rows (validation): the accuracy and loss with each head's output masked out, one head at a time; the
paper's cheaper gradient score, E_x |dL(x)/d xi_h| for a gate xi_h = 1 on each head's output, and its rank
correlation with the masking; and the accuracy as heads are pruned cumulatively, least important first.

Shapes: L layers, H heads per layer, N rows, B a batch.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torchmetrics.functional import spearman_corrcoef

from ..data.progress import progress as progress_of
from ..inference import Batch, batched, forward_batches
from ..model.classifier import TransformerClassifier
from .passes import Passes


@dataclass
class HeadImportance:
    """What masking each head does to accuracy and loss, the gradient score, and the pruning curves."""

    rows: int  # labelled rows scored
    accuracy: float  # with every head
    loss: float
    masked_accuracy: np.ndarray  # (L, H): with that one head masked out
    masked_loss: np.ndarray  # (L, H)
    gradient: np.ndarray  # (L, H): E_x |dL(x)/d xi_h|, the gates at 1
    # rank correlation of the gradient score and the size of the loss change from masking, |L(xi=0) - L(xi=1)|,
    # which the score estimates to first order (both unsigned: masking a head can also lower the loss)
    spearman: float
    # how heads are ordered for pruning ("masking": by loss increase, "gradient": by the score), least first,
    # and the accuracy / loss with the first 0, 1, ..., L*H of them masked out
    pruning: dict[str, dict[str, list[Any]]] = field(default_factory=dict)  # order: [layer, head]; scores

    @property
    def accuracy_drop(self) -> np.ndarray:
        """(L, H): accuracy with every head minus accuracy with that head masked (positive: the head helps)."""
        return self.accuracy - self.masked_accuracy

    @property
    def loss_increase(self) -> np.ndarray:
        """(L, H): loss with that head masked minus loss with every head (positive: the head helps)."""
        return self.masked_loss - self.loss

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every number, (L, H) tables as nested lists."""
        return {
            "rows": self.rows,
            "accuracy": self.accuracy,
            "loss": self.loss,
            "masked_accuracy": self.masked_accuracy.tolist(),
            "masked_loss": self.masked_loss.tolist(),
            "accuracy_drop": self.accuracy_drop.tolist(),
            "loss_increase": self.loss_increase.tolist(),
            "gradient": self.gradient.tolist(),
            "spearman_gradient_vs_masking": self.spearman,
            "pruning": self.pruning,
        }

    def summary(self) -> list[str]:
        """A few lines for the console: the full model, the most and least important heads, the proxy's agreement."""
        L, H = self.masked_loss.shape
        order = np.argsort(-self.loss_increase, axis=None, kind="stable")
        top, low = np.unravel_index(order[0], (L, H)), np.unravel_index(order[-1], (L, H))

        def head(lh: tuple[int, int]) -> str:
            layer, h = int(lh[0]), int(lh[1])
            drop, rise = self.accuracy_drop[layer, h], self.loss_increase[layer, h]
            return f"layer {layer} head {h} (acc {0.0 - drop:+.3f}, loss {rise + 0.0:+.4f})"

        curve = self.pruning["masking"]["accuracy"]
        keep = max(j for j, acc in enumerate(curve) if acc >= self.accuracy - 0.01)
        return [
            f"with all {L * H} heads: accuracy {self.accuracy:.3f}, loss {self.loss:.4f} ({self.rows} rows)",
            f"masked alone, most important: {head(top)}; least: {head(low)}",
            f"gradient score vs |loss change| when masked (Spearman): {self.spearman:.2f}",
            f"pruned least important first: {keep} of {L * H} heads go before accuracy falls 0.01 or more",
        ]


def passes(rows: int, num_layers: int, num_heads: int) -> Passes:
    """The model work of `head_importance` on `rows` rows of a model of `num_layers` x `num_heads` heads: each
    row forward with every head, with each head masked alone, at each step of the two pruning orders, and once
    forward and backward for the gradient score."""
    heads = num_layers * num_heads
    return Passes(forward=rows * (1 + heads + 2 * heads + 1), backward=rows)


def head_importance(
    net: TransformerClassifier,
    rows: Sequence[Sequence[int]],
    labels: Sequence[int],
    *,
    batch_size: int = 256,
    progress: bool | None = None,
) -> HeadImportance:
    """Score every head of `net` (a TransformerClassifier) on `rows` (token ids) with their `labels`, in eval mode.

    Loss is the mean cross-entropy over the rows. Every forward pass takes a head mask (L, H): 1 keeps a head,
    0 masks its output; the gradient score takes per-row gates (N, L, H) at 1, so |dL(x)/d xi| is per row as in
    the paper. `progress`: a bar over the masked forward passes (None: on a terminal only).
    """
    config = net.config
    L, H = config.num_layers, config.num_heads
    data = batched(net, rows, batch_size=batch_size, by_length=True, labels=labels)  # padded once, for every pass

    def score(head_mask: torch.Tensor) -> tuple[float, float]:
        """Accuracy and mean loss over every row with `head_mask` (L, H)."""
        correct, loss = 0.0, 0.0
        for batch, out in forward_batches(net, data, head_mask=head_mask):
            logits, labels = out.logits.double(), _labels(batch)  # (B, C), (B,)
            correct += (logits.argmax(-1) == labels).sum().item()
            loss += F.cross_entropy(logits, labels, reduction="sum").item()
        return correct / len(rows), loss / len(rows)

    full = torch.ones(L, H)
    accuracy, loss = score(full)
    masked_acc, masked_loss = np.empty((L, H)), np.empty((L, H))
    long = progress is True or (progress is None and (sys.stderr.isatty() or len(rows) >= 5000))  # as faithfulness
    bar = progress_of(3 * L * H, "head importance", "pass", show=long)
    for layer in range(L):
        for h in range(H):
            head_mask = full.clone()
            head_mask[layer, h] = 0.0
            masked_acc[layer, h], masked_loss[layer, h] = score(head_mask)
            bar.update()
    gradient = np.zeros((L, H))
    gates = torch.ones(len(rows), L, H, requires_grad=True)  # (N, L, H): xi = 1 on every head, per row
    for batch, out in forward_batches(net, data, head_mask=gates, grad=True):
        with torch.enable_grad():
            (grad,) = torch.autograd.grad(F.cross_entropy(out.logits.double(), _labels(batch), reduction="sum"), gates)
        gradient += grad[batch.index].abs().sum(dim=0).double().numpy()  # d L(x) / d xi, this batch's rows
    gradient /= len(rows)
    result = HeadImportance(
        rows=len(rows),
        accuracy=accuracy,
        loss=loss,
        masked_accuracy=masked_acc,
        masked_loss=masked_loss,
        gradient=gradient,
        spearman=_spearman(np.abs(masked_loss - loss), gradient),
    )
    for name, importance in (("masking", result.loss_increase), ("gradient", gradient)):
        order = [
            tuple(int(i) for i in np.unravel_index(j, (L, H))) for j in np.argsort(importance, axis=None, kind="stable")
        ]
        accuracies, losses = [accuracy], [loss]
        head_mask = full.clone()
        for layer, h in order:
            head_mask[layer, h] = 0.0
            acc, lo = score(head_mask)
            accuracies.append(acc)
            losses.append(lo)
            bar.update()
        result.pruning[name] = {"order": [list(lh) for lh in order], "accuracy": accuracies, "loss": losses}
    bar.close()
    return result


def _labels(batch: Batch) -> torch.Tensor:
    """A labelled batch's labels (B,): `head_importance` batches its rows with their labels."""
    assert batch.labels is not None  # batched(..., labels=...) above
    return batch.labels


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation of two (L, H) tables (torchmetrics', ties ranked by their mean as scipy's spearmanr
    ranks them); NaN when either is constant."""
    if a.size < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    ranked = [torch.as_tensor(x.ravel(), dtype=torch.float64) for x in (a, b)]
    return float(spearman_corrcoef(*ranked))
