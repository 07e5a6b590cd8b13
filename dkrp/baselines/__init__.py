"""Data-dependent feature maps learnt from training rows: Nyström, KG-RP and PCA.

Each samples what it needs from the data in one pass (landmark rows for Nyström
and KG-RP, column sums and ``X^T X`` for PCA) and carries its learnt arrays in its
spec, so :func:`dkrp.from_spec` and :func:`dkrp.load` rebuild it exactly.
"""

from .kulis_grauman import KulisGraumanRP
from .nystroem import Nystroem
from .pca import PCAProjector

__all__ = ["KulisGraumanRP", "Nystroem", "PCAProjector"]
