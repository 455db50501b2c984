"""Background exports (experiments/run_exports.py): the run page's export buttons and
``POST /api/runs/{id}/exports`` queue a job that writes the export to a file, whose progress
the page and the API show, and whose file is handed out until it expires a day later."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from experiments import exports, run_exports
from experiments.actions import do_start_run
from experiments.exports import export_chunks
from experiments.models import ExportStatus, Run, RunExport, RunStatus
from experiments.run_exports import (
    do_request_export,
    expire_exports,
    export_file,
    requeue_abandoned_exports,
    write_export_job,
)
from tests.conftest import api_client, client_for, make_api_key, work_queue


@pytest.fixture(autouse=True)
def export_dir(settings, tmp_path):
    settings.PRBENCH_EXPORT_DIR = tmp_path / "exports"
    return settings.PRBENCH_EXPORT_DIR


@pytest.fixture
def run(experiment, alice):
    """8 attempts (4 tasks, 2 arms), their jobs never enqueued: the export reads them queued."""
    return do_start_run(experiment, alice)


@pytest.fixture
def request_export(django_capture_on_commit_callbacks):
    """POST the run page's export button as ``user``, and queue its job as the commit would."""

    def post(user, run, **fields):
        with django_capture_on_commit_callbacks(execute=True):
            return client_for(user).post(reverse("experiments:run_exports", args=[run.code]), fields)

    return post


def streamed(run, format: str) -> bytes:
    return b"".join(c.encode() if isinstance(c, str) else c for c in export_chunks(run, format))


@pytest.mark.parametrize("format", ["json", "csv", "swebench-preds"])
def test_the_job_writes_the_file_the_stream_gives(bob, run, request_export, format):
    response = request_export(bob, run, format=format)
    assert response.status_code == 302
    assert response["Location"] == reverse("experiments:run", args=[run.code]) + "#exports"
    export = RunExport.objects.get()
    assert (export.status, export.requested_by, export.org) == (ExportStatus.QUEUED, bob, run.org)
    work_queue()
    export.refresh_from_db()
    assert export.status == ExportStatus.DONE, export.error
    assert export_file(export).read_bytes() == streamed(run, format)
    assert export.size == len(streamed(run, format))
    assert export.expires_at == export.finished_at + timedelta(days=1)
    assert [p.name for p in export_file(export).parent.iterdir()] == [export.path]  # no part file left


def test_the_download_is_the_file(bob, run, request_export):
    request_export(bob, run, format="csv")
    work_queue()
    export = RunExport.objects.get()
    response = client_for(bob).get(reverse("experiments:run_export_download", args=[export.code]))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert f'filename="prbench-run-{run.code}.csv"' in response["Content-Disposition"]
    assert b"".join(response.streaming_content) == streamed(run, "csv")


def test_one_arms_file_is_exported(bob, run, request_export):
    request_export(bob, run, format="swebench-preds", arm="oracle", rep="0")
    work_queue()
    export = RunExport.objects.get()
    assert (export.status, export.options) == (ExportStatus.DONE, {"arm": "oracle", "rep": 0})
    assert export.file_name == f"prbench-run-{run.code}-swebench-preds-oracle.jsonl"


def test_running_the_job_twice_writes_once(bob, run, request_export):
    request_export(bob, run, format="json")
    export = RunExport.objects.get()
    write_export_job(export.pk)
    done = RunExport.objects.get()
    write_export_job(export.pk)  # a duplicate job, or a retry: finds the row claimed and done
    again = RunExport.objects.get()
    assert (again.status, again.updated_at, again.path) == (ExportStatus.DONE, done.updated_at, done.path)
    assert len(list(export_file(again).parent.iterdir())) == 1


def test_a_double_click_makes_one_export(bob, run, request_export):
    request_export(bob, run, format="json")
    request_export(bob, run, format="json")
    assert RunExport.objects.count() == 1


def test_progress_is_reported_every_so_often_not_per_row(bob, run, request_export, monkeypatch):
    monkeypatch.setattr(exports, "TRANSCRIPT_CHUNK_ROWS", 3)
    monkeypatch.setattr(run_exports, "PROGRESS_EVERY_S", 0)  # every chunk, to see each
    seen = []
    mark = run_exports._mark

    def spy(export_id, token, **fields):
        if "rows_written" in fields and "status" not in fields:
            seen.append((fields["rows_written"], RunExport.objects.get(pk=export_id).rows_total))
        return mark(export_id, token, **fields)

    monkeypatch.setattr(run_exports, "_mark", spy)
    request_export(bob, run, format="json")
    work_queue()
    export = RunExport.objects.get()
    assert seen == [(3, 8), (6, 8), (8, 8)]
    assert (export.rows_written, export.rows_total, export.percent) == (8, 8, 100)


def test_the_page_shows_progress_while_it_is_written(bob, run, request_export):
    request_export(bob, run, format="json")
    RunExport.objects.update(status=ExportStatus.RUNNING, rows_written=6, rows_total=8)
    client = client_for(bob)
    page = client.get(reverse("experiments:run", args=[run.code])).content.decode()
    assert "being written: 6 of 8 rows" in page
    assert f'hx-get="{reverse("experiments:run_exports", args=[run.code])}" hx-trigger="every 1s"' in page
    poll = client.get(reverse("experiments:run_exports", args=[run.code]), headers={"HX-Request": "true"})
    assert poll.status_code == 200
    RunExport.objects.update(status=ExportStatus.FAILED, error="the run fell over")
    last = client.get(reverse("experiments:run_exports", args=[run.code]), headers={"HX-Request": "true"})
    assert last.status_code == 286  # nothing left being written: htmx stops asking
    assert "the run fell over" in last.content.decode()


def test_the_page_offers_the_download_when_done(bob, run, request_export):
    request_export(bob, run, format="json")
    work_queue()
    export = RunExport.objects.get()
    page = client_for(bob).get(reverse("experiments:run", args=[run.code])).content.decode()
    assert reverse("experiments:run_export_download", args=[export.code]) in page


def test_an_expired_export_is_deleted_and_offered_again(bob, run, request_export):
    request_export(bob, run, format="json")
    work_queue()
    export = RunExport.objects.get()
    path = export_file(export)
    assert expire_exports(timedelta(0)) == {"exports_expired": 0}  # not a day old yet
    RunExport.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert expire_exports(timedelta(0)) == {"exports_expired": 1}
    assert not path.exists()
    assert RunExport.objects.get().status == ExportStatus.EXPIRED
    client = client_for(bob)
    response = client.get(reverse("experiments:run_export_download", args=[export.code]), follow=True)
    page = response.content.decode()
    assert "That json export is expired" in page
    assert "its file was deleted a day after it was written" in page
    assert "Make it again" in page
    request_export(bob, run, format="json")  # the button
    assert RunExport.objects.filter(status=ExportStatus.QUEUED).count() == 1


def test_a_dead_workers_export_is_written_again(
    bob, run, request_export, clean_redis, django_capture_on_commit_callbacks
):
    request_export(bob, run, format="json")
    export = RunExport.objects.get()
    clean_redis.flushdb()  # the job is gone with its worker's Redis
    # Claimed by a worker that died half way: its part file left behind, its row not moving.
    RunExport.objects.update(status=ExportStatus.RUNNING, claim_token="00000000-0000-0000-0000-000000000001")
    part = run_exports.export_dir() / f"{export.code}.{'0' * 31}1.part"
    part.write_bytes(b'{"run": ')
    assert requeue_abandoned_exports(timedelta(0)) == {"exports_requeued": 0}  # it moved a moment ago
    RunExport.objects.update(updated_at=timezone.now() - timedelta(minutes=2))
    with django_capture_on_commit_callbacks(execute=True):
        assert requeue_abandoned_exports(timedelta(0)) == {"exports_requeued": 1}
    assert not part.exists()
    work_queue()
    export.refresh_from_db()
    assert export.status == ExportStatus.DONE
    assert export_file(export).read_bytes() == streamed(run, "json")


def test_a_late_result_of_a_lost_claim_is_not_recorded(bob, run, request_export):
    request_export(bob, run, format="csv")
    export = RunExport.objects.get()
    token = run_exports._claim(export.pk)
    RunExport.objects.update(claim_token=None, status=ExportStatus.QUEUED)  # taken back by the sweep
    assert run_exports._end(export.pk, token, status=ExportStatus.DONE) == 0
    assert RunExport.objects.get().status == ExportStatus.QUEUED


def test_a_refused_export_says_why(bob, experiment, request_export):
    run = do_start_run(experiment, inference_only=True)
    response = request_export(bob, run, format="swebench-report")
    assert RunExport.objects.count() == 0
    page = client_for(bob).get(response["Location"]).content.decode()
    assert "was inference-only: no patch was validated" in page


def test_an_unknown_arm_is_refused(bob, run, request_export):
    request_export(bob, run, format="swebench-preds", arm="nobody", rep="0")
    assert RunExport.objects.count() == 0


def test_it_checks_ownership(charlie, bob, run, request_export):
    request_export(bob, run, format="json")
    work_queue()
    export = RunExport.objects.get()
    outsider = client_for(charlie)
    assert outsider.get(reverse("experiments:run_export_download", args=[export.code])).status_code == 404
    assert outsider.get(reverse("experiments:run_exports", args=[run.code])).status_code == 404
    assert outsider.post(reverse("experiments:run_exports", args=[run.code]), {"format": "csv"}).status_code == 404
    assert RunExport.objects.count() == 1


def test_a_viewer_may_export(vera, run, request_export):
    request_export(vera, run, format="csv")
    assert RunExport.objects.get().requested_by == vera


def test_a_large_run_is_not_streamed_in_the_request(bob, run, settings):
    settings.PRBENCH_EXPORT_STREAM_MAX_ATTEMPTS = 7
    client = client_for(bob)
    response = client.get(reverse("experiments:run_export", args=[run.code, "json"]), follow=True)
    assert "this run has 8 attempts, more than a download in the request may carry (7)" in response.content.decode()
    report = client.get(reverse("experiments:run_export", args=[run.code, "html"]))
    assert report.status_code == 200  # the report reads the run's summaries, whatever its size
    key = api_client(make_api_key(run.org, ["read"]))
    refused = key.get(f"/api/runs/{run.code}/exports/json")
    assert refused.status_code == 422
    assert "start a background export instead" in refused.json()["error"]["message"]


# --- the API ---------------------------------------------------------------------------------


def test_the_api_round_trip(run, django_capture_on_commit_callbacks):
    client = api_client(make_api_key(run.org, ["read"]))
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(f"/api/runs/{run.code}/exports", {"format": "json"}, content_type="application/json")
    assert started.status_code == 202
    body = started.json()
    assert (body["status"], body["download_url"], body["format"]) == ("queued", None, "json")
    assert body["run"] == str(run.code)
    export = RunExport.objects.get()
    assert body["status_url"] == f"/api/exports/{export.code}"
    early = client.get(f"/api/exports/{export.code}/file")
    assert early.status_code == 409
    work_queue()
    status = client.get(body["status_url"])
    assert status.status_code == 200
    done = status.json()
    assert (done["status"], done["rows_written"], done["rows_total"], done["percent"]) == ("done", 8, 8, 100)
    assert done["download_url"] == f"/api/exports/{export.code}/file"
    file = client.get(done["download_url"])
    assert file.status_code == 200
    assert file["Content-Type"] == "application/json"
    assert b"".join(file.streaming_content) == streamed(run, "json")
    RunExport.objects.update(expires_at=timezone.now())
    expire_exports(timedelta(0))
    gone = client.get(done["download_url"])
    assert gone.status_code == 410
    assert client.get(body["status_url"]).json()["status"] == "expired"


def test_the_api_refuses_what_cannot_be_made(run):
    client = api_client(make_api_key(run.org, ["read"]))
    response = client.post(
        f"/api/runs/{run.code}/exports", {"format": "csv", "arm": "oracle"}, content_type="application/json"
    )
    assert response.status_code == 422
    assert "only swebench-preds and swebench-report export one arm at a time" in response.json()["error"]["message"]
    assert RunExport.objects.count() == 0


def test_the_api_checks_ownership(run, charlie, bob):
    export = do_request_export(run, "json", {}, bob)
    other = key_of_own_org(charlie)
    started = other.post(f"/api/runs/{run.code}/exports", {"format": "json"}, content_type="application/json")
    assert started.status_code == 404
    assert other.get(f"/api/exports/{export.code}").status_code == 404
    assert other.get(f"/api/exports/{export.code}/file").status_code == 404


def key_of_own_org(user):
    """A key of ``user``'s own organisation (not the run's)."""
    return api_client(make_api_key(user.memberships.get().org, ["read"]))


def test_an_export_past_its_day_is_not_handed_out_before_the_sweep_deletes_it(bob, run, request_export):
    """Between its expiry and the sweep, a written file may be deleted at any moment: the
    download says it expired instead of failing mid-response, and asking for the same export
    again makes a new one rather than reuse one with its day nearly over."""
    request_export(bob, run, format="csv")
    work_queue()
    first = RunExport.objects.get()
    assert export_file(first) is not None
    RunExport.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    first.refresh_from_db()
    assert first.status == ExportStatus.DONE and export_file(first) is None
    response = client_for(bob).get(reverse("experiments:run_export_download", args=[first.code]))
    assert response.status_code == 302
    Run.objects.filter(pk=run.pk).update(status=RunStatus.COMPLETED, finished_at=first.created_at - timedelta(1))
    run.refresh_from_db()
    request_export(bob, run, format="csv")
    assert RunExport.objects.count() == 2
