"""A dataset's environments in the browser: its recipes and their form, the build button, each
environment's progress and its build log; scoped through the datasets access layer."""

import pytest
from django.template.defaultfilters import floatformat
from django.urls import reverse

from datasets.environments import runtime_for
from datasets.models import Dataset, DatasetKind, EnvironmentRecipe, TaskInstance
from evaluation.environments import BuildFailed
from evaluation.models import Environment, EnvironmentStatus
from tests.cli import run_command
from tests.conftest import client_for, work_queue
from tests.datasets.conftest import REPO

KEY = "f" * 32


def bare_recipe(dataset, version="", **fields):
    return EnvironmentRecipe.objects.create(
        dataset=dataset, repo=REPO, version=version, python="3.11", project="", **fields
    )


def form_data(**changes):
    data = {
        "repo": REPO,
        "version": "1.0",
        "python": "3.11",
        "packages": "pytest==8.3.4\nattrs\n",
        "requirements": "",
        "project": "-e .[test]",
        "pre_install": "",
        "system_packages": "",
        "test_command": "{python} -m pytest -q",
        "test_env": "LANG=C.UTF-8",
        "source": "",
    }
    return {**data, **changes}


def pages(dataset, key=KEY):
    return [
        reverse("datasets:environments", args=[dataset.code]),
        reverse("datasets:environment_recipe", args=[dataset.code]),
        reverse("datasets:environment_log", args=[dataset.code, key]),
    ]


def test_the_section_shows_recipes_and_each_environment_built(alice, org, repo_dataset, environment_cache):
    bare_recipe(repo_dataset, source="written by hand")
    run_command("environments", "build", "--org", org.slug, "--dataset", "tiny")
    record = Environment.objects.get()
    response = client_for(alice).get(reverse("datasets:detail", args=[repo_dataset.code]))
    assert response.status_code == 200
    page = response.content.decode()
    assert "<h2>Environments</h2>" in page and "<code>local/tiny</code>" in page and "every version" in page
    assert "written by hand" in page and "Build environments</button>" in page
    assert f'<code title="{record.key}">{record.key[:12]}</code>' in page and "local/tiny 1.0, local/tiny 2.0" in page
    assert '<span class="status ready">Ready</span>' in page and f"{floatformat(record.build_seconds, 1)} s" in page
    assert reverse("datasets:environment_log", args=[repo_dataset.code, record.key]) in page
    assert "hx-get" not in page  # nothing to wait for
    log = client_for(alice).get(reverse("datasets:environment_log", args=[repo_dataset.code, record.key]))
    assert log.status_code == 200
    assert (
        "$ uv venv --python 3.11" in log.content.decode()
        and "for local/tiny 1.0, local/tiny 2.0" in log.content.decode()
    )


def test_a_failed_build_shows_its_last_lines(alice, repo_dataset, environment_cache):
    bare_recipe(repo_dataset, pre_install=["echo the compiler is missing; exit 4"])
    task = repo_dataset.tasks.exclude(repo="").first()
    with pytest.raises(BuildFailed):  # as a validation meets it: it records the key on its task
        runtime_for(task)
    page = client_for(alice).get(reverse("datasets:environments", args=[repo_dataset.code])).content.decode()
    assert '<span class="status failed">Failed</span>' in page
    assert '<pre class="log">' in page and "the compiler is missing" in page
    assert "Build again, failed ones too" in page


def test_a_queued_build_is_polled_until_it_finishes(alice, repo_dataset):
    bare_recipe(repo_dataset)
    repo_dataset.tasks.exclude(repo="").update(environment_key=KEY)
    Environment.objects.create(
        key=KEY,
        status=EnvironmentStatus.BUILDING,
        step="install attrs",
        steps_done=1,
        steps_total=3,
        log="$ uv venv --python 3.11\n",
    )
    client = client_for(alice)
    url = reverse("datasets:environments", args=[repo_dataset.code])
    page = client.get(reverse("datasets:detail", args=[repo_dataset.code])).content.decode()
    assert f'hx-get="{url}" hx-trigger="every 2s"' in page and "step 2 of 3" in page and 'aria-valuenow="33"' in page
    polled = client.get(url, headers={"HX-Request": "true"})
    assert polled.status_code == 200 and polled.content.decode().lstrip().startswith('<section id="environments"')
    Environment.objects.filter(key=KEY).update(status=EnvironmentStatus.READY, steps_done=3, size_bytes=2048)
    finished = client.get(url, headers={"HX-Request": "true"})
    assert finished.status_code == 286 and "2.0\xa0KB" in finished.content.decode()
    log = client.get(reverse("datasets:environment_log", args=[repo_dataset.code, KEY]), headers={"HX-Request": "true"})
    assert log.status_code == 286 and "$ uv venv --python 3.11" in log.content.decode()


def test_the_build_button_queues_the_builds_a_worker_makes(
    alice, repo_dataset, environment_cache, django_capture_on_commit_callbacks
):
    bare_recipe(repo_dataset)
    client = client_for(alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("datasets:environments_build", args=[repo_dataset.code]))
    assert response.status_code == 302
    with django_capture_on_commit_callbacks(execute=True):
        work_queue()  # works out the keys, queues their builds
    assert Environment.objects.get().status == EnvironmentStatus.QUEUED
    work_queue()  # builds
    assert Environment.objects.get().status == EnvironmentStatus.READY
    assert repo_dataset.tasks.exclude(repo="").exclude(environment_key="").count() == 3
    page = client.get(response["Location"]).content.decode()
    assert "Queued: a worker works out which environments the tasks need" in page


def test_the_form_adds_a_recipe_then_edits_it(alice, repo_dataset):
    client = client_for(alice)
    url = reverse("datasets:environment_recipe", args=[repo_dataset.code])
    assert client.get(url).status_code == 200
    response = client.post(url, form_data())
    assert response.status_code == 302
    recipe = EnvironmentRecipe.objects.get()
    assert recipe.packages == ["pytest==8.3.4", "attrs"] and recipe.test_command == ["{python}", "-m", "pytest", "-q"]
    assert recipe.test_env == {"LANG": "C.UTF-8"} and recipe.source == "set on the dataset's page"
    edit = client.get(f"{url}?repo={REPO}&version=1.0").content.decode()
    assert "pytest==8.3.4\nattrs</textarea>" in edit and 'value="{python} -m pytest -q"' in edit
    assert client.post(url, form_data(packages="", project="")).status_code == 302
    recipe.refresh_from_db()
    assert recipe.packages == [] and recipe.project == "" and EnvironmentRecipe.objects.count() == 1


def test_the_form_shows_each_bad_field_and_saves_nothing(alice, repo_dataset):
    url = reverse("datasets:environment_recipe", args=[repo_dataset.code])
    response = client_for(alice).post(
        url,
        form_data(
            python="3", packages="--index-url=https://evil.example", requirements="../../etc/passwd", version="7.7"
        ),
    )
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert set(errors) == {"python", "packages", "requirements", "version"}
    assert "starts with '-'" in errors["packages"][0] and "no '..'" in errors["requirements"][0]
    assert not EnvironmentRecipe.objects.exists()


def test_members_see_but_do_not_change(bob, vera, repo_dataset):
    bare_recipe(repo_dataset)
    for user in (bob, vera):
        client = client_for(user)
        page = client.get(reverse("datasets:environments", args=[repo_dataset.code])).content.decode()
        assert "<code>local/tiny</code>" in page and "Build environments" not in page and "Edit</a>" not in page
        assert (
            client.post(reverse("datasets:environment_recipe", args=[repo_dataset.code]), form_data()).status_code
            == 403
        )
        assert client.post(reverse("datasets:environments_build", args=[repo_dataset.code])).status_code == 403
    assert EnvironmentRecipe.objects.count() == 1


def test_outsiders_get_404_on_every_page(charlie, repo_dataset):
    bare_recipe(repo_dataset)
    repo_dataset.tasks.exclude(repo="").update(environment_key=KEY)
    Environment.objects.create(key=KEY, status=EnvironmentStatus.READY, log="secret build output")
    client = client_for(charlie)
    for url in pages(repo_dataset):
        assert client.get(url).status_code == 404, url
    assert client.post(pages(repo_dataset)[1], form_data()).status_code == 404
    assert client.post(reverse("datasets:environments_build", args=[repo_dataset.code])).status_code == 404


def test_a_build_record_is_reached_only_through_the_datasets_own_keys(alice, charlie, repo_dataset):
    """charlie's organisation built KEY; alice's dataset does not use it until one of its tasks does."""
    other = Dataset.objects.create(org=charlie.memberships.get().org, name="theirs", kind=DatasetKind.PR_PATCH)
    TaskInstance.objects.create(dataset=other, external_id="t", position=0, repo="them/private", environment_key=KEY)
    Environment.objects.create(key=KEY, label="them/private 1.0", status=EnvironmentStatus.READY, log="their log")
    client = client_for(alice)
    log_url = reverse("datasets:environment_log", args=[repo_dataset.code, KEY])
    assert client.get(log_url).status_code == 404
    assert "their log" not in client.get(reverse("datasets:environments", args=[repo_dataset.code])).content.decode()
    repo_dataset.tasks.filter(external_id="tiny-0").update(environment_key=KEY)  # the same recipe and files
    page = client.get(log_url).content.decode()
    assert "their log" in page and "for local/tiny 1.0" in page and "them/private" not in page
