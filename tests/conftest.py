"""Test-wide settings.

Hypothesis: under CI (``CI`` set, as the CI runner does) the property and fuzz tests run a fixed,
derandomized set of examples, so a landing never depends on the luck of a random seed; locally
they explore new examples on every run. ``HYPOTHESIS_PROFILE=explore`` runs more examples.

The CPU compiler's disk cache (``lamina/targets/cpu/cache.py``) lives in a directory of the run's
own, removed at its end (unless ``LAMINA_CACHE_DIR`` is set): a test run never writes into the
user's ``~/.cache``, and no run's result depends on what an earlier one left there."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("explore", max_examples=2000, deadline=None)
settings.register_profile("dev", deadline=None)

settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))

if "LAMINA_CACHE_DIR" not in os.environ:
    _CACHE = tempfile.mkdtemp(prefix="lamina-test-cache-")
    os.environ["LAMINA_CACHE_DIR"] = _CACHE
    atexit.register(shutil.rmtree, _CACHE, True)
