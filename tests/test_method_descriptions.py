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
