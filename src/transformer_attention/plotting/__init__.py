"""Pictures of attention on a colour scale the colour bar states (scales.py): heatmaps and rollout bars (plots.py),
drawn once and rendered fast at every logged step (figures.py, bars.py), the review shaded by the pooled row
(text.py), the interactive page (html.py) and the analyses' figures (analysis.py)."""

from .analysis import plot_faithfulness, plot_head_importance, plot_pruning
from .bars import RolloutBars
from .figures import AttentionGrid
from .html import attention_html, read_attention_data, save_attention_html
from .plots import (
    attention_window,
    figure_to_array,
    plot_attention,
    plot_confusion_matrix,
    plot_rollout,
    save_attention_png,
    save_figure,
)
from .rollout import attention_rollout, pooled_rollout
from .scales import DEFAULT_SCALE, SCALES, scaled
from .text import ReviewText, paragraphs
from .windows import key_window, window_labels
from .words import POOLED_ROW, Word, join_pieces, pooled_row, word_values

__all__ = [
    "DEFAULT_SCALE",
    "POOLED_ROW",
    "SCALES",
    "ReviewText",
    "Word",
    "AttentionGrid",
    "RolloutBars",
    "attention_html",
    "attention_rollout",
    "attention_window",
    "figure_to_array",
    "join_pieces",
    "key_window",
    "paragraphs",
    "plot_attention",
    "plot_confusion_matrix",
    "plot_faithfulness",
    "plot_head_importance",
    "plot_pruning",
    "plot_rollout",
    "pooled_rollout",
    "pooled_row",
    "read_attention_data",
    "save_attention_html",
    "save_attention_png",
    "save_figure",
    "scaled",
    "window_labels",
    "word_values",
]
