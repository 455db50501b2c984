"""The egress policy: outbound connections go only to public addresses, or to the private
networks platform staff allowed. Every server here listens on loopback, and every made-up
host name is answered by the patched resolver: nothing is ever sent anywhere else."""

from __future__ import annotations

import socket
import threading
from http.server import ThreadingHTTPServer
from ipaddress import ip_address, ip_network

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.urls import reverse

from experiments.actions import ArmSpec as ExperimentArm
from experiments.actions import do_replace_arms, do_start_run
from experiments.models import Attempt
from prbench import egress
from prbench.settings import networks
from providers import gateway
from providers.actions import do_test_connection
from providers.errors import ErrorCategory, ProviderError
from providers.models import ProviderCredential
from providers.types import ArmSpec
from tests.conftest import client_for, work_queue
from tests.providers.contracts import KEY, REQUEST, WIRES, openai_body
from tests.providers.fake_server import FakeProvider, Reply

# What an internal page would answer: it must never be shown, because it is never asked.
INTERNAL = {"error": {"message": "INTERNAL-ADMIN-PAGE root:x:0:0"}}
LOOPBACK = networks("test", "127.0.0.0/8,::1/128")


def net(*cidrs: str):
    return tuple(ip_network(c) for c in cidrs)


@pytest.mark.parametrize(
    "address, allowed, expected",
    [
        ("8.8.8.8", (), True),
        ("2606:4700:4700::1111", (), True),
        ("::ffff:8.8.8.8", (), True),
        ("172.32.0.1", (), True),  # just outside 172.16.0.0/12
        ("127.0.0.1", (), False),
        ("127.0.0.1", LOOPBACK, True),
        ("127.0.0.2", net("127.0.0.2/32"), True),
        ("127.0.0.1", net("127.0.0.2/32"), False),
        ("::1", (), False),
        ("::1", LOOPBACK, True),
        ("::ffff:127.0.0.1", (), False),
        ("::ffff:127.0.0.1", LOOPBACK, True),  # on the wire it is 127.0.0.1
        ("169.254.169.254", (), False),
        ("169.254.169.254", LOOPBACK, False),
        ("::ffff:169.254.169.254", LOOPBACK, False),
        ("fe80::1", (), False),
        ("fe80::1", LOOPBACK, False),
        ("10.1.2.3", (), False),
        ("10.1.2.3", net("10.0.0.0/8"), True),
        ("10.1.2.3", net("10.2.0.0/16"), False),
        ("172.16.0.1", (), False),
        ("172.31.255.255", (), False),
        ("192.168.1.1", (), False),
        ("100.64.0.1", (), False),  # carrier-grade NAT: not "private" to Python, not public either
        ("0.0.0.0", (), False),
        ("0.0.0.0", LOOPBACK, False),
        ("::", LOOPBACK, False),
        ("224.0.0.1", (), False),
        ("ff02::1", (), False),
        ("fc00::1", (), False),
        ("fec0::1", (), False),  # deprecated site-local
        ("240.0.0.1", (), False),
        ("255.255.255.255", (), False),
        ("::127.0.0.1", (), False),  # IPv4-compatible form
        ("2002:7f00:1::", (), False),  # 6to4 of 127.0.0.1
        ("2002:808:808::", (), True),  # 6to4 of 8.8.8.8
        ("64:ff9b::a9fe:a9fe", (), False),  # NAT64 of 169.254.169.254
    ],
)
def test_the_policy_on_a_table_of_addresses(address, allowed, expected):
    assert egress.address_allowed(ip_address(address), allowed) is expected


@pytest.mark.parametrize(
    "host, address",
    [
        ("127.0.0.1", "127.0.0.1"),
        ("[::1]", "::1"),
        ("127.1", "127.0.0.1"),
        ("0x7f.0.0.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("api.openai.com", None),
    ],
)
def test_literal_addresses_in_every_spelling_the_resolver_accepts(host, address):
    assert egress.literal_address(host) == (ip_address(address) if address else None)


def test_the_setting_is_parsed_strictly():
    assert networks("X", " 10.0.0.0/8, fd00::/8 ,") == net("10.0.0.0/8", "fd00::/8")
    assert networks("X", "") == ()
    for bad in ("10.0.0.0/33", "intranet", "10.1.2.3/8"):
        with pytest.raises(ImproperlyConfigured, match=rf"X: '{bad}'"):
            networks("X", f"127.0.0.0/8,{bad}")


@pytest.fixture
def refuse_loopback(settings):
    settings.PRBENCH_ALLOWED_PRIVATE_NETWORKS = ()


@pytest.fixture
def resolver(monkeypatch):
    """Answers for made-up ``.test`` names (one list per lookup, the last repeated); every
    other name goes to the real resolver. Records each lookup of a ``.test`` name."""
    real = socket.getaddrinfo
    answers: dict[str, list[list[str]]] = {}
    lookups: list[str] = []

    def getaddrinfo(host, port, *args, **kwargs):
        if not isinstance(host, str) or not host.endswith(".test"):
            return real(host, port, *args, **kwargs)
        lookups.append(host)
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        script = answers[host]
        addresses = script.pop(0) if len(script) > 1 else script[0]
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return answers, lookups


def save_credential(org, provider, base_url, **fields):
    spec = WIRES[provider]
    credential = ProviderCredential(
        org=org,
        provider=provider,
        base_url=base_url,
        api_version=spec.api_version,
        deployments=spec.deployments or {},
        **fields,
    )
    credential.set_api_key(KEY)
    credential.save()
    return credential


def call(org, provider, **config):
    arm = ArmSpec(provider, WIRES[provider].model, {"max_retries": 2, "retry_base_ms": 1, "timeout_read_s": 5} | config)
    return gateway.complete(org.pk, arm, REQUEST)


@pytest.mark.parametrize("provider", sorted(WIRES))
def test_a_loopback_endpoint_is_refused_through_the_real_gateway(org, fake, refuse_loopback, provider):
    save_credential(org, provider, fake.url + WIRES[provider].base_suffix)
    fake.default = Reply(200, INTERNAL)
    with pytest.raises(ProviderError) as caught:
        call(org, provider)
    error = caught.value
    assert error.category == ErrorCategory.EGRESS_REFUSED and not error.retryable
    assert error.retries == 0  # an arm allowing two retries does not knock again
    assert fake.seen == []
    assert "127.0.0.1" in error.message and "PRBENCH_ALLOWED_PRIVATE_NETWORKS" in error.message
    assert "INTERNAL" not in error.message and KEY not in error.message


def test_test_connection_names_the_refusal_and_shows_no_body(alice, org, fake, refuse_loopback):
    save_credential(org, "openai_compatible", fake.url + "/v1")
    fake.default = Reply(200, INTERNAL)
    credential = ProviderCredential.objects.get(org=org, provider="openai_compatible")
    report = do_test_connection(org, credential)
    assert not report.ok and report.category == "egress_refused"
    response = client_for(alice).post(
        reverse("providers:test_connection", args=[org.code, credential.code]),
        {"model": ""},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    assert fake.seen == []
    content = response.content.decode()
    assert "egress_refused" in content and "127.0.0.1" in content and "INTERNAL" not in content


def test_a_refused_attempt_is_recorded_and_shown_as_egress_refused(
    alice, org, experiment, fake, refuse_loopback, django_capture_on_commit_callbacks
):
    save_credential(org, "openai_compatible", fake.url + "/v1")
    fake.default = Reply(200, INTERNAL)
    do_replace_arms(experiment, [ExperimentArm("local", "openai_compatible", "llama3", {"max_retries": 1})])
    with django_capture_on_commit_callbacks(execute=True):
        run = do_start_run(experiment, inference_only=True)
    work_queue()
    attempts = list(Attempt.objects.filter(run=run))
    assert attempts and {(a.status, a.error_category) for a in attempts} == {("failed", "egress_refused")}
    assert fake.seen == []
    page = client_for(alice).get(reverse("experiments:attempt", args=[attempts[0].code]))
    assert page.status_code == 200
    content = page.content.decode()
    assert "egress_refused" in content and "INTERNAL" not in content


def test_a_name_is_judged_by_the_address_it_resolves_to(org, fake, refuse_loopback, resolver):
    answers, _ = resolver
    answers["models.internal.test"] = [["127.0.0.1"]]
    port = fake.server.server_address[1]
    for host in ("models.internal.test", "localhost"):
        ProviderCredential.objects.filter(org=org).delete()
        save_credential(org, "openai_compatible", f"http://{host}:{port}/v1")
        with pytest.raises(ProviderError) as caught:
            call(org, "openai_compatible")
        assert caught.value.category == ErrorCategory.EGRESS_REFUSED
        assert host in caught.value.message
    assert fake.seen == []


def test_every_address_of_a_name_must_pass(org, fake, settings, resolver):
    settings.PRBENCH_ALLOWED_PRIVATE_NETWORKS = net("127.0.0.2/32")
    answers, _ = resolver
    answers["mixed.test"] = [["127.0.0.2", "127.0.0.1"]]
    save_credential(org, "openai_compatible", f"http://mixed.test:{fake.server.server_address[1]}/v1")
    with pytest.raises(ProviderError) as caught:
        call(org, "openai_compatible")
    assert caught.value.category == ErrorCategory.EGRESS_REFUSED and "127.0.0.1" in caught.value.message


@pytest.fixture
def twin_servers():
    """Two fake providers on one port: "refused" on 127.0.0.1, "allowed" on 127.0.0.2."""
    refused, allowed = FakeProvider(), FakeProvider()
    port = refused.server.server_address[1]
    allowed.server.shutdown()
    allowed.server.server_close()
    allowed.server = ThreadingHTTPServer(("127.0.0.2", port), allowed.server.RequestHandlerClass)
    allowed.server.daemon_threads = True
    allowed.thread = threading.Thread(target=allowed.server.serve_forever, daemon=True)
    allowed.thread.start()
    yield refused, allowed, port
    refused.close()
    allowed.close()


def test_dns_rebinding_connects_to_the_address_that_was_checked(org, settings, resolver, twin_servers):
    settings.PRBENCH_ALLOWED_PRIVATE_NETWORKS = net("127.0.0.2/32")
    refused, allowed, port = twin_servers
    answers, lookups = resolver
    answers["rebind.test"] = [["127.0.0.2"], ["127.0.0.1"]]  # checked answer first, then the rebound one
    refused.default = Reply(200, openai_body("INTERNAL"))
    allowed.default = Reply(200, openai_body("from the checked address"))
    save_credential(org, "openai_compatible", f"http://rebind.test:{port}/v1")
    completion = call(org, "openai_compatible")
    assert completion.text == "from the checked address"
    assert refused.seen == [] and len(allowed.seen) == 1
    assert lookups == ["rebind.test"]  # resolved once, not again by the socket layer
    assert allowed.seen[0].headers["host"] == f"rebind.test:{port}"  # the name is kept for the server


def test_dns_rebinding_the_other_way_is_refused(org, settings, resolver, twin_servers):
    settings.PRBENCH_ALLOWED_PRIVATE_NETWORKS = net("127.0.0.2/32")
    refused, allowed, port = twin_servers
    answers, _ = resolver
    answers["rebind.test"] = [["127.0.0.1"], ["127.0.0.2"]]
    save_credential(org, "openai_compatible", f"http://rebind.test:{port}/v1")
    with pytest.raises(ProviderError) as caught:
        call(org, "openai_compatible")
    assert caught.value.category == ErrorCategory.EGRESS_REFUSED
    assert "rebind.test" in caught.value.message and "127.0.0.1" in caught.value.message
    assert refused.seen == [] and allowed.seen == []


def test_proxies_from_the_environment_are_not_a_way_around(org, fake, monkeypatch):
    proxy = FakeProvider()
    try:
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            monkeypatch.setenv(name, proxy.url)
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        save_credential(org, "openai_compatible", fake.url + "/v1")
        fake.default = Reply(200, openai_body("direct"))
        assert call(org, "openai_compatible").text == "direct"
        assert proxy.seen == [] and len(fake.seen) == 1
    finally:
        proxy.close()


def test_a_redirect_is_not_followed_with_the_key(org, fake):
    elsewhere = FakeProvider()
    try:
        save_credential(org, "anthropic", fake.url)
        fake.default = Reply(307, {}, {"location": elsewhere.url + "/v1/messages"})
        elsewhere.default = Reply(200, WIRES["anthropic"].success)
        with pytest.raises(ProviderError):
            call(org, "anthropic")
        assert len(fake.seen) == 1 and elsewhere.seen == []
    finally:
        elsewhere.close()


def test_the_catalog_fetch_is_refused_the_same_way(settings, tmp_path, fake, refuse_loopback):
    settings.VAR_DIR = tmp_path
    settings.PRBENCH_OPENROUTER_MODELS_URL = fake.url + "/api/v1/models"
    fake.default = Reply(200, {"data": [{"id": "internal/model"}]})
    with pytest.raises(CommandError, match=r"egress refused: 127\.0\.0\.1 is not a public internet address"):
        call_command("models", "refresh")
    assert fake.seen == []


@pytest.mark.parametrize(
    "base_url, problem",
    [
        ("http://169.254.169.254/latest/meta-data", "169.254.169.254 is not a public internet address"),
        ("http://10.0.0.5:8000/v1", "10.0.0.5 is not a public internet address"),
        ("http://[::ffff:169.254.169.254]/v1", "is not a public internet address"),
        ("http://[fe80::1]/v1", "fe80::1 is not a public internet address"),
        ("http://0x7f.1:8000/v1", "is not a public internet address"),
        ("https://user:secret@api.example.com/v1", "must not contain a user name or password"),
        ("https://api.example.com:99999/v1", "not a valid URL"),
    ],
)
def test_a_refused_base_url_is_refused_at_save(alice, org, settings, base_url, problem):
    settings.PRBENCH_ALLOWED_PRIVATE_NETWORKS = net("127.0.0.2/32")
    data = {"provider": "openai", "api_key": KEY, "base_url": base_url, "api_version": "", "deployments": ""}
    response = client_for(alice).post(reverse("providers:save_credential", args=[org.code]), data)
    assert response.status_code == 302
    assert not ProviderCredential.objects.exists()
    messages = [str(m) for m in response.wsgi_request._messages]
    assert any("base_url: " in m and problem in m for m in messages), messages


@pytest.mark.parametrize("base_url", ["http://127.0.0.2:8000/v1", "https://models.internal.test/v1"])
def test_an_allowed_address_or_any_name_is_saved(alice, org, settings, base_url):
    """A name may resolve anywhere later, so it is judged when it is connected to."""
    settings.PRBENCH_ALLOWED_PRIVATE_NETWORKS = net("127.0.0.2/32")
    data = {"provider": "openai", "api_key": KEY, "base_url": base_url, "api_version": "", "deployments": ""}
    response = client_for(alice).post(reverse("providers:save_credential", args=[org.code]), data)
    assert response.status_code == 302
    assert ProviderCredential.objects.get(org=org).base_url == base_url
