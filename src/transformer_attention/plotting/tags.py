"""The order TensorBoard opens a run's groups in. Its TIME SERIES tab (its default) groups tags by their first part,
sorts the groups by name and opens the first two only; its IMAGES tab opens its first group. In TensorBoard alone,
every group but the validation curves' is written with a leading "~", which sorts after every letter: TIME SERIES
opens on `val/acc` and the other validation curves (with the train curves first, `val/acc` fell below the fold of a
1600 x 1000 window), the train curves are `~train/...`; and the analysis' charts are `~model_analysis/...`, after
the attention maps (`~attention/...`), which IMAGES then opens on. HPARAMS shows the test metrics under their own
names."""

from __future__ import annotations

CURVES = ("val",)
GROUPS = {"analysis": "model_analysis"}  # renamed in TensorBoard: after `attention` (the config's key is the same)


def tensorboard_tag(tag: str) -> str:
    """The tag TensorBoard gets for `tag`: `val/...` as it is, any other `~group/...` (`GROUPS` renamed)."""
    group, sep, rest = tag.partition("/")
    if group in CURVES or tag.startswith("~"):
        return tag
    return f"~{GROUPS.get(group, group)}{sep}{rest}"
