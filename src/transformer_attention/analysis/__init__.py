"""Which heads and which words matter, measured on a trained classifier: head importance by masking each head
and by the gradient score (heads.py, Michel et al. 2019), token attributions by six methods (attributions.py:
attention, rollout, gradient x input, Integrated Gradients, leave-one-out, random) and how faithful each is by
the ERASER measures (faithfulness.py, DeYoung et al. 2020); report.py plans, runs and writes them.

The names below load with their module on first use (PEP 562): `analysis.settings`, all that a config check
needs, imports no torch.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .settings import ANALYSES, ExplainConfig, check_analyses, check_explain

if TYPE_CHECKING:
    from .attributions import METHODS, attribute  # noqa: F401
    from .faithfulness import Explained, Faithfulness, eraser_scores, explain_texts, faithfulness  # noqa: F401
    from .heads import HeadImportance, head_importance  # noqa: F401
    from .report import Analysis, explain_settings, plan, run_analyses  # noqa: F401

_NAMES_BY_MODULE = {
    "attributions": ("METHODS", "attribute"),
    "faithfulness": ("Explained", "Faithfulness", "eraser_scores", "explain_texts", "faithfulness"),
    "heads": ("HeadImportance", "head_importance"),
    "report": ("Analysis", "explain_settings", "plan", "run_analyses"),
}
_WHERE = {name: module for module, names in _NAMES_BY_MODULE.items() for name in names}

__all__ = ["ANALYSES", "ExplainConfig", "check_analyses", "check_explain", *sorted(_WHERE)]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{_WHERE[name]}", __name__), name)
