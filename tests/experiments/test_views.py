import json, time
import pytest
from django.test import Client
from django.urls import reverse
from experiments.actions import do_start_run
from experiments.models import *
from tests.conftest import client_for, work_queue


def test_probe(experiment, alice, django_capture_on_commit_callbacks):
    c = client_for(alice)
    r = c.get(reverse("experiments:edit", args=[experiment.code]))
    html = r.content.decode()
    import re
    print(re.findall(r'<select name="arms-2-provider".*?</select>', html, re.S))
    print(re.findall(r'<textarea name="arms-\d-config".*?</textarea>', html, re.S))
    c2 = Client(raise_request_exception=False); c2.force_login(alice)
    r = c2.post(reverse("experiments:run_start", args=[experiment.code]), {"seed": "--1"})
    print("seed --1", r.status_code)
    r = c2.post(reverse("experiments:run_start", args=[experiment.code]), {"seed": "99999999999999999999"})
    print("seed big", r.status_code)
    t = time.time()
    with django_capture_on_commit_callbacks(execute=True):
        run = do_start_run(experiment, alice, inference_only=True)
    work_queue()
    run.refresh_from_db()
    print("inference run", run.status, time.time() - t)
