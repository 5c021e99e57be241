"""Word dropout and adversarial training (model/regularizers.py, `model.word_dropout`, `model.adversarial_eps`):
the masks they draw, the perturbation against a first-order oracle, and the module's training step with them."""

from __future__ import annotations

import torch

from transformer_attention.model import TransformerClassifier
from transformer_attention.model.regularizers import adversarial_loss, word_dropout
from transformer_attention.module import ClassifierModule


def _batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 50, (6, 12), generator=g)
    lengths = torch.tensor([12, 9, 5, 3, 2, 7])
    mask = torch.arange(12)[None, :] < lengths[:, None]
    ids[~mask] = 0
    return ids, mask, torch.randint(0, 2, (6,), generator=g)


def test_word_dropout_drops_real_tokens_at_its_rate_and_keeps_the_first_and_one_per_row():
    _, mask, _ = _batch()
    assert word_dropout(mask, 0.0) is mask
    g = torch.Generator().manual_seed(0)
    draws = torch.stack([word_dropout(mask, 0.3, generator=g) for _ in range(2000)])
    assert not (draws & ~mask).any()  # padding never comes back
    assert draws[:, :, 0].all()  # [CLS] stays
    assert draws.any(dim=2).all()
    rest = mask.clone()
    rest[:, 0] = False
    rate = 1 - draws[:, rest].float().mean().item()
    assert abs(rate - 0.3) < 0.01, rate


def _net(dtype: torch.dtype = torch.float64) -> TransformerClassifier:
    torch.manual_seed(0)
    net = TransformerClassifier(vocab_size=50, num_classes=2, d_model=16, num_heads=2, num_layers=2, dim_feedforward=32)
    return net.to(dtype).eval()


def _loss_of(labels: torch.Tensor):
    return lambda logits: torch.nn.functional.cross_entropy(logits, labels)


def test_the_adversarial_loss_rises_by_eps_times_the_gradient_norm_to_first_order():
    ids, mask, labels = _batch()
    net = _net()
    # the oracle: the gradient of the loss in the embedded inputs, by autograd on an explicit leaf
    leaf = net.embedding(ids).detach().requires_grad_()
    handle = net.embedding.register_forward_hook(lambda module, inputs, output: leaf)
    clean = torch.nn.functional.cross_entropy(net(ids, mask).logits, labels)
    (grad,) = torch.autograd.grad(clean, leaf)
    handle.remove()
    norms = grad.flatten(1).norm(dim=1)
    for eps in (1e-4, 1e-3):
        loss, logits, adversarial = adversarial_loss(net, ids, mask, _loss_of(labels), eps)
        torch.testing.assert_close(loss, clean)
        assert logits.shape == (6, 2)
        # each example moves eps along its own gradient: the mean loss rises by eps * mean(||g_i||) / ... to first
        # order; the batch loss is a mean over examples, whose gradients are 1/B of the per-example ones
        expected = eps * norms.sum()
        assert abs((adversarial - loss).item() - expected.item()) < 0.02 * expected.item()


def test_the_adversarial_direction_raises_the_loss_more_than_random_ones():
    ids, mask, labels = _batch(1)
    net = _net()
    loss, _, adversarial = adversarial_loss(net, ids, mask, _loss_of(labels), 0.5)
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        noise = torch.randn(net.embedding(ids).shape, generator=g, dtype=torch.float64)
        noise = 0.5 * noise / noise.flatten(1).norm(dim=1)[:, None, None]
        handle = net.embedding.register_forward_hook(lambda module, inputs, output, n=noise: output + n)
        moved = torch.nn.functional.cross_entropy(net(ids, mask).logits, labels)
        handle.remove()
        assert adversarial > moved > loss - 0.5


def test_a_frozen_embedding_still_gets_its_perturbation_and_the_rest_trains():
    ids, mask, labels = _batch(2)
    net = _net()
    net.embedding.weight.requires_grad_(False)
    loss, _, adversarial = adversarial_loss(net, ids, mask, _loss_of(labels), 0.5)
    assert adversarial > loss
    (loss + adversarial).backward()
    assert net.embedding.weight.grad is None
    assert net.head.weight.grad is not None and net.head.weight.grad.abs().sum() > 0
    assert not net.embedding._forward_hooks  # the hooks are gone


def test_the_modules_training_loss_adds_the_adversarial_term_and_evaluation_has_none():
    ids, mask, labels = _batch(3)
    batch = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    settings = {"vocab_size": 50, "num_classes": 2, "d_model": 16, "num_heads": 2, "num_layers": 1}
    torch.manual_seed(0)
    plain = ClassifierModule(**settings, dropout=0.0).eval()
    torch.manual_seed(0)
    adv = ClassifierModule(**settings, dropout=0.0, adversarial_eps=1.0, word_dropout=0.2).eval()
    assert adv.hparams.adversarial_eps == 1.0 and adv.hparams.word_dropout == 0.2
    clean, _, _ = plain.model_step(batch, train=True)
    torch.testing.assert_close(adv.model_step(batch)[0], clean)  # validation and test: no regulariser
    adv.hparams.word_dropout = 0.0
    total, _, _ = adv.model_step(batch, train=True)
    assert total > 2 * clean - 1e-6  # the clean loss plus a larger one
