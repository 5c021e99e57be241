"""Which heads and which words matter, measured on a trained classifier: head importance by masking each head
and by the gradient score (heads.py, Michel et al. 2019), token attributions by every method of the registry
(methods/: attention and rollout, of the weights and of the norm-weighted maps, ALTI, value zeroing, DecompX,
AttnLRP, gradient x input, Integrated Gradients, leave-one-out, random; `decompx(net, ids, mask)` takes the logits
apart by word) and how faithful each is by the ERASER measures (faithfulness.py, DeYoung et al. 2020).
plan.py checks what a run asks for before any work, run.py runs it (every forward pass through inference.py),
write.py draws and writes what it found.

The names below load with their module on first use (PEP 562): `analysis.settings`, all that a config check
needs, imports no torch. `plan()` is imported from `analysis.plan`, the module of the same name.
"""

from typing import TYPE_CHECKING

from ..checks import lazy_face
from .settings import ANALYSES, AnalysisConfig, check_analyses, check_analysis_settings

if TYPE_CHECKING:
    from .attributions import attribute  # noqa: F401
    from .faithfulness import Explained, Faithfulness, eraser_scores, explain_texts, faithfulness  # noqa: F401
    from .heads import HeadImportance, head_importance  # noqa: F401
    from .methods import Method, labels, register  # noqa: F401
    from .methods.decompx import Decomposition, decompx  # noqa: F401
    from .plan import Plan, analysis_settings  # noqa: F401
    from .run import Analysis, explain_rows, run_analyses  # noqa: F401
    from .write import figures, summary, write_files  # noqa: F401

__getattr__, _LAZY = lazy_face(__name__, __file__)
__all__ = ["ANALYSES", "AnalysisConfig", "check_analyses", "check_analysis_settings", *_LAZY]
