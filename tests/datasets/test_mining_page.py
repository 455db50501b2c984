"""Mining a repository from the datasets page: only the repositories staff list (enabled,
for every organisation or this one) are offered or accepted; the job runs ingest_prs's code
with a real worker and counts its decisions; owners and admins only."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from datasets.mining import check_start_mining, mine_repository_job
from datasets.models import Dataset, MinedCandidate, MiningJob, MiningSource, MiningStatus, TaskInstance
from evaluation.testbed import build_testbed
from orgs.models import Organization
from prbench.queues import get_queue
from tests.conftest import client_for, work_queue
from tests.samples import DASHES, MINUTES, SPLITTER

MINE = reverse("datasets:mining_new")


@pytest.fixture
def textkit(tmp_path, settings):
    settings.PRBENCH_REPO_CACHE_DIR = tmp_path / "cache"
    return build_testbed(tmp_path / "textkit")


@pytest.fixture
def source(textkit):
    return MiningSource.objects.create(name="local/textkit", path=str(textkit))


def mine(client, source_id, dataset="textkit", max_candidates=2, **extra):
    data = {"source": str(source_id), "dataset_name": dataset, "max_tasks": "10", "max_candidates": str(max_candidates)}
    return client.post(MINE, {**data, **extra})


def test_the_page_offers_only_the_allowed_repositories(alice, org, source, tmp_path):
    MiningSource.objects.create(name="local/off", path=str(tmp_path / "off"), enabled=False)
    elsewhere = Organization.objects.create(slug="elsewhere", name="Elsewhere")
    MiningSource.objects.create(name="local/theirs", path=str(tmp_path / "theirs"), org=elsewhere)
    MiningSource.objects.create(name="local/ours", path=str(tmp_path / "ours"), org=org)

    content = client_for(alice).get(MINE).content.decode()

    assert "local/textkit" in content and "local/ours" in content
    assert "local/off" not in content and "local/theirs" not in content


@pytest.mark.parametrize("which", ["disabled", "another organisation's", "unknown"])
def test_mining_refuses_a_repository_not_on_the_staff_list(
    alice, source, tmp_path, which, django_capture_on_commit_callbacks
):
    if which == "disabled":
        refused = MiningSource.objects.create(name="local/off", path=str(tmp_path), enabled=False).pk
    elif which == "another organisation's":
        elsewhere = Organization.objects.create(slug="elsewhere", name="Elsewhere")
        refused = MiningSource.objects.create(name="local/theirs", path=str(tmp_path), org=elsewhere).pk
    else:
        refused = 4242

    with django_capture_on_commit_callbacks() as callbacks:
        response = mine(client_for(alice), refused, path="/etc")  # and a path of one's own is no field at all

    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert not MiningJob.objects.exists() and callbacks == [] and get_queue().get_job_ids() == []


def test_the_action_refuses_a_source_disabled_since_the_form(org, source):
    MiningSource.objects.filter(pk=source.pk).update(enabled=False)
    source.refresh_from_db()

    with pytest.raises(ValidationError, match="'local/textkit' is not one the platform allows mining"):
        check_start_mining(org, source, "textkit")


def test_mining_into_a_dataset_of_another_kind_is_refused(alice, org, source):
    Dataset.objects.create(org=org, name="quiz", kind="qa_exact")

    response = mine(client_for(alice), source.pk, dataset="quiz")

    assert response.status_code == 200
    assert "dataset &#x27;quiz&#x27; holds Question and answer (Jeopardy style) tasks" in response.content.decode()
    assert not MiningJob.objects.exists()


def test_mining_runs_as_a_job_with_progress_and_each_run_makes_a_version(
    alice, org, source, django_capture_on_commit_callbacks
):
    client = client_for(alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = mine(client, source.pk, max_candidates=2)
    job = MiningJob.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("datasets:mining", args=[job.code])
    assert job.status == MiningStatus.QUEUED and get_queue().get_job_ids() == [job.job_id]
    queued = client.get(response["Location"], HTTP_HX_REQUEST="true")
    assert queued.status_code == 200 and "Waiting for a worker" in queued.content.decode()

    work_queue()

    job.refresh_from_db()
    assert job.status == MiningStatus.DONE, job.message
    assert (job.kept, job.rejected) == (1, 1) and job.skipped >= 1  # the commit that changes only tests
    assert job.kept == MinedCandidate.objects.filter(kept=True).count()
    assert job.rejected == MinedCandidate.objects.filter(kept=False, subject=SPLITTER).count()
    dataset = Dataset.objects.get(org=org, name="textkit")
    assert job.dataset == dataset and dataset.version == 1
    assert list(dataset.tasks.values_list("title", "dataset_version")) == [(MINUTES, 1)]
    done = client.get(response["Location"], HTTP_HX_REQUEST="true")
    assert done.status_code == 286
    assert "<strong>1</strong> kept · <strong>1</strong> rejected" in done.content.decode()

    with django_capture_on_commit_callbacks(execute=True):
        mine(client, source.pk, max_candidates=1)  # goes on from the decisions saved
    work_queue()

    dataset.refresh_from_db()
    assert dataset.version == 2
    assert list(dataset.tasks.order_by("position").values_list("title", "dataset_version")) == [
        (MINUTES, 1),
        (DASHES, 2),
    ]


def test_a_mining_job_run_twice_mines_once(org, source):
    job = MiningJob.objects.create(org=org, source=source, dataset_name="textkit", max_tasks=1, max_candidates=2)

    mine_repository_job(job.pk)
    mine_repository_job(job.pk)  # finds it done

    job.refresh_from_db()
    assert job.status == MiningStatus.DONE and job.kept == 1
    assert TaskInstance.objects.count() == 1 and MinedCandidate.objects.count() == 2


def test_a_source_that_is_no_repository_fails_with_the_reason(org, tmp_path):
    broken = MiningSource.objects.create(name="local/gone", path=str(tmp_path / "gone"))
    job = MiningJob.objects.create(org=org, source=broken, dataset_name="textkit", max_tasks=1, max_candidates=1)

    mine_repository_job(job.pk)

    job.refresh_from_db()
    assert job.status == MiningStatus.FAILED and "no such directory" in job.message
    assert not Dataset.objects.exists()


@pytest.mark.parametrize("who", ["bob", "vera"])
def test_members_and_viewers_cannot_mine(who, request, alice, source):
    client = client_for(request.getfixturevalue(who))

    assert client.get(MINE).status_code == 403
    assert mine(client, source.pk).status_code == 403
    assert not MiningJob.objects.exists()


def test_it_checks_ownership(charlie, org, source):
    job = MiningJob.objects.create(org=org, source=source, dataset_name="textkit", max_tasks=1, max_candidates=1)
    client = client_for(charlie)

    assert client.get(reverse("datasets:mining", args=[job.code])).status_code == 404
    assert client.post(reverse("datasets:mining_retry", args=[job.code])).status_code == 404
    # charlie's own organisation may mine the platform's repositories into its own datasets.
    assert "local/textkit" in client.get(MINE).content.decode()
