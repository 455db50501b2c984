"""The workload registry (evaluation/workloads/__init__.py) is the one list of kinds: each
kind's class names and labels it, and the dataset kinds are read from there."""

from datasets.models import Dataset, DatasetKind
from evaluation.workloads import WORKLOADS, kind_choices, workload_for


def test_every_kind_is_registered_under_its_own_name():
    assert all(workload_for(kind).kind == kind for kind in WORKLOADS)


def test_dataset_kinds_are_the_registered_ones():
    assert DatasetKind.choices == kind_choices() == [(kind, workload_for(kind).label) for kind in WORKLOADS]
    assert DatasetKind.PR_PATCH == "pr_patch"
    assert Dataset(kind="code_exec").get_kind_display() == "Code execution"
