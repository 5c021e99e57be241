"""The order TensorBoard opens a run's groups in: TIME SERIES sorts them by name and opens the first two, so in
TensorBoard alone every group but the validation curves' gets a leading "~", which sorts after every letter
(it opens on `val/acc`); the analysis' charts are `~model_analysis/...`, after the maps that IMAGES opens on."""

from __future__ import annotations

CURVES = ("val",)
GROUPS = {"analysis": "model_analysis"}  # renamed in TensorBoard: after `attention` (the config's key is the same)


def tensorboard_tag(tag: str) -> str:
    """The tag TensorBoard gets for `tag`: `val/...` as it is, any other `~group/...` (`GROUPS` renamed)."""
    group, sep, rest = tag.partition("/")
    if group in CURVES or tag.startswith("~"):
        return tag
    return f"~{GROUPS.get(group, group)}{sep}{rest}"
