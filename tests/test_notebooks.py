"""Every library notebook under nbs/ (and its layer folders) runs top to bottom as a test (its example cells are the assertions)."""
import os
from pathlib import Path

import pytest
from nbdev.test import test_nb as run_notebook

from conftest import run_slow

NBS = Path(__file__).resolve().parent.parent / "nbs"
# Report templates under nbs/reports are executed by papermill in their own tests, with parameters.
NOTEBOOKS = sorted(p for p in NBS.rglob("*.ipynb")
                   if not p.name.startswith("_") and not {"reports", ".ipynb_checkpoints"} & set(p.relative_to(NBS).parts))


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=[p.relative_to(NBS).with_suffix("").as_posix() for p in NOTEBOOKS])
def test_notebook(nb, request, monkeypatch):
    monkeypatch.chdir(nb.parent)   # a notebook reads files relative to its own folder, as in Jupyter
    skip = [] if run_slow(request.config) else ["slow"]
    ok, secs = run_notebook(nb, skip_flags=skip, basepath=str(NBS.parent))
    assert ok, f"{nb.name} failed (see the traceback above)"
