"""A run built row by row (no provider, no sandbox), so every figure of its boards is known."""

from __future__ import annotations

import pytest

from tests.factories import build_run


@pytest.fixture
def built_run(experiment, dataset):
    def build(plans, **options):
        return build_run(experiment, dataset, plans, **options)

    return build
