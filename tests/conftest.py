"""Test-wide settings.

Hypothesis: under CI (``CI`` set, as the CI runner does) the property and fuzz tests run a fixed,
derandomized set of examples, so a landing never depends on the luck of a random seed; locally
they explore new examples on every run. ``HYPOTHESIS_PROFILE=explore`` runs more examples."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("explore", max_examples=2000, deadline=None)
settings.register_profile("dev", deadline=None)

settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))
