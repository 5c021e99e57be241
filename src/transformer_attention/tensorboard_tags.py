"""The order TensorBoard opens a run's groups in. Its TIME SERIES tab (its default) groups tags by their first part,
sorts the groups by name and opens the first two only: with this project's names those would be `attention` (the
maps, too small to read in a card) and `test` (single numbers), with the loss and accuracy curves closed below. In
TensorBoard alone, every group but the curves' is written with a leading "~", which sorts after every letter: the
curves open first, the results and the pictures follow. HPARAMS shows the test metrics under their own names. The
two step-level series (the loss at every step, the learning rate) go to `~train` too: with them the train group
filled two rows of a 1600 x 1000 window and pushed `val/acc` below the fold."""

from __future__ import annotations

CURVES = ("train", "val")
STEP_SERIES = ("train/loss_step", "train/lr")


def tensorboard_tag(tag: str) -> str:
    """The tag TensorBoard gets for `tag`: `train/...` (but `STEP_SERIES`) and `val/...` as they are, any other
    `~tag`."""
    curve = tag.split("/", 1)[0] in CURVES and tag not in STEP_SERIES
    return tag if curve or tag.startswith("~") else f"~{tag}"
