"""Every explanation method says, in one line, what a word's number means and its unit (views read it)."""

from transformer_attention.analysis.methods import DESCRIPTIONS, Method, descriptions, methods, register, unregister


def test_every_registered_method_has_a_one_line_description() -> None:
    found = descriptions()
    assert set(found) == set(methods()) and len(found) >= 12
    for name, text in found.items():
        assert text and "\n" not in text and len(text) < 200, name
        assert methods()[name].description == text


def test_a_method_registered_with_its_own_description_keeps_it() -> None:
    mine = Method("decompx_probe_only", "probe", signed=False, explain=methods()["random"].explain, description="x")
    try:
        assert register(mine).description == "x"
        assert descriptions()["decompx_probe_only"] == "x"
    finally:
        unregister("decompx_probe_only")
    assert "decompx_probe_only" not in DESCRIPTIONS


def test_null_runs_every_method_but_those_run_only_when_named() -> None:
    import torch

    from transformer_attention.analysis.attributions import attribute
    from transformer_attention.analysis.methods import default_names, names
    from transformer_attention.model import TransformerClassifier

    assert set(names()) - set(default_names()) == {"decompx_paper"}  # its cost grows with the cube of the length
    torch.manual_seed(0)
    net = TransformerClassifier(vocab_size=20, num_classes=2, d_model=8, num_heads=2, num_layers=1, max_len=16).eval()
    (found,), _ = attribute(net, [[1, 5, 6, 7]], [0], mask_id=None, ig_steps=2)
    assert tuple(found) == default_names()
    (named,), _ = attribute(net, [[1, 5, 6, 7]], [0], mask_id=None, methods=["decompx_paper"])
    assert list(named) == ["decompx_paper"] and named["decompx_paper"].shape == (4,)
