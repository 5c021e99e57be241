"""Two regularisers of the training loss on small data (`model.word_dropout`, `model.adversarial_eps`).

- Word dropout (Iyyer et al. 2015): each real token but the first (`[CLS]`) leaves the attention mask with
  probability p, so the model reads the review without it; every row keeps at least one token.
- Adversarial training (Miyato et al. 2017): the loss again, on embeddings moved by `eps * g / ||g||` along
  the gradient g of the loss with respect to the token embeddings (the embedding layer's output, before the
  sqrt(d_model) scale; ||g|| over each example's whole sequence); one more forward and backward a step.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn


def word_dropout(mask: torch.Tensor, p: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """`mask` (B, T) bool with each True after position 0 set False with probability `p`; a row that would
    lose all its tokens keeps them all. p = 0 returns `mask` itself."""
    if p <= 0:
        return mask
    drop = torch.rand(mask.shape, generator=generator, device=mask.device) < p
    drop[:, 0] = False
    kept = mask & ~drop
    empty = ~kept.any(dim=1, keepdim=True)
    return torch.where(empty, mask, kept)


def _embedding_hook(net: nn.Module, hook: Callable[[torch.Tensor], object]) -> torch.utils.hooks.RemovableHandle:
    return net.get_submodule("embedding").register_forward_hook(lambda module, inputs, output: hook(output))


def adversarial_loss(
    net: nn.Module,
    input_ids: torch.Tensor,
    mask: torch.Tensor,
    loss_of: Callable[[torch.Tensor], torch.Tensor],
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss, logits, adversarial loss) of `net` on a batch: `loss_of(logits)` as usual, then `loss_of` of the
    logits on embeddings perturbed by `eps * g / ||g||` (the perturbation is a constant: no gradient flows
    through it). The gradient is taken even while the embedding weights are frozen."""
    embedded: list[torch.Tensor] = []

    def keep(output: torch.Tensor) -> torch.Tensor:
        if not output.requires_grad:  # a frozen embedding: the inputs still get a gradient
            output = output.detach().requires_grad_()
        embedded.append(output)
        return output

    handle = _embedding_hook(net, keep)
    try:
        logits = net(input_ids, mask).logits
    finally:
        handle.remove()
    loss = loss_of(logits)
    (grad,) = torch.autograd.grad(loss, embedded[0], retain_graph=True)
    norm = grad.flatten(1).norm(dim=1).clamp_min(1e-12).view(-1, *([1] * (grad.dim() - 1)))
    shift = (eps * grad / norm).detach()
    handle = _embedding_hook(net, lambda output: output + shift)
    try:
        adversarial = loss_of(net(input_ids, mask).logits)
    finally:
        handle.remove()
    return loss, logits, adversarial
