"""Measure operator times and write them as llmcap op tables (`estimators._op_tables`).

`run_profile` times a model's operators with torch on whatever device runs it (the optional
extra ``llmcap[profile]``; torch is imported only there); `import_vidur` converts Vidur's
public profiling CSVs.  Both write the directory that ``--estimator profiled --op-tables
DIR`` reads.
"""

from __future__ import annotations

from estimators.profiler._device import ProfilerError, sku_for_gpu_name
from estimators.profiler._plan import FULL_GRID, QUICK_GRID, ProfileGrid
from estimators.profiler._run import ProfileResult, ProfileSettings, run_profile
from estimators.profiler._vidur_import import (
    VIDUR_GPUS,
    VidurImport,
    VidurImportError,
    import_vidur,
)

__all__ = [
    "FULL_GRID",
    "QUICK_GRID",
    "VIDUR_GPUS",
    "ProfileGrid",
    "ProfileResult",
    "ProfileSettings",
    "ProfilerError",
    "VidurImport",
    "VidurImportError",
    "import_vidur",
    "run_profile",
    "sku_for_gpu_name",
]
