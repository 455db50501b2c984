"""Where PRBench may open outbound connections: the one egress policy.

Credential endpoints are typed in by customers, so without a policy a worker could be pointed
at PRBench's own internal services (loopback, the cloud metadata address, the private network)
and quote their answers back. The policy refuses every address outside the public internet
unless platform staff allowed its network in ``PRBENCH_ALLOWED_PRIVATE_NETWORKS``.

It is enforced where the socket is opened, on the resolved address: the host name is resolved
once, every address it resolves to is checked, and the connection goes to a checked address
itself, so a name that resolves differently the second time (DNS rebinding) cannot slip
through. TLS still verifies the certificate against the host name, and the Host header keeps
it, because the HTTP layer above only sees a socket.

Every outbound HTTP client comes from :func:`http_client`: the provider adapters' (``providers``)
and, through :func:`post`, the webhook deliveries' (``orgs``). It sits on the ground floor so
both can use it; this module and ``providers`` are the only places that import the HTTP stack.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpcore2
import httpx2
import idna
from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

SETTING = "PRBENCH_ALLOWED_PRIVATE_NETWORKS"
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # the well-known prefix: its last 32 bits are an IPv4 address
# The SDKs' own defaults (openai._constants.DEFAULT_CONNECTION_LIMITS), kept when we hand them a client.
LIMITS = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)


class EgressRefused(Exception):
    """A connection the policy refused. Raised before any socket is opened, so nothing answered."""

    def __init__(self, host: str, address: str) -> None:
        self.host = host
        self.address = address
        where = host if host == address else f"{host} resolves to {address}, which"
        super().__init__(f"{where} is not a public internet address; platform staff can allow its network in {SETTING}")


def allowed_networks() -> tuple[IPNetwork, ...]:
    return tuple(settings.PRBENCH_ALLOWED_PRIVATE_NETWORKS)


def address_allowed(address: IPAddress, allowed: Iterable[IPNetwork]) -> bool:
    """The policy itself, a pure function: public addresses pass, anything else only inside
    an allowed network. An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is its IPv4 address on
    the wire, so it is judged as one."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return any(address in network for network in allowed) or _public(address)


def _public(address: IPAddress) -> bool:
    special = (
        address.is_private
        or address.is_loopback
        or address.is_link_local  # 169.254.0.0/16 (cloud metadata), fe80::/10
        or address.is_multicast  # Python counts 224.0.0.0/4 and ff00::/8 as "global"
        or address.is_unspecified
        or address.is_reserved
        or not address.is_global  # also 100.64.0.0/10 (carrier-grade NAT), which is not "private"
    )
    if isinstance(address, ipaddress.IPv6Address):
        special = special or address.is_site_local or not all(_public(v4) for v4 in _embedded_ipv4(address))
    return not special


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses a translating gateway would forward to: 6to4, Teredo and NAT64."""
    embedded = [address.sixtofour] if address.sixtofour else []
    embedded += list(address.teredo or ())
    if address in NAT64:
        embedded.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return embedded


def literal_address(host: str) -> IPAddress | None:
    """The address a host written as a number stands for, including the forms the resolver
    also accepts ("127.1", "0x7f.0.0.1", "2130706433"), or None for a name."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except (OSError, ValueError):
        return None


def url_problem(url: str) -> str | None:
    """Why a configured endpoint is refused before it is ever used, or None. Only literal
    addresses can be judged here (a name may resolve anywhere later): the connect-time check
    stays the real guard."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError:
        return "not a valid URL"
    if "@" in parts.netloc:
        return "must not contain a user name or password (user:pass@); the key goes in api_key"
    if not host:
        return "has no host"
    address = literal_address(host)
    if address is None:
        return host_name_problem(host)
    if not address_allowed(address, allowed_networks()):
        return f"{host} is not a public internet address; platform staff can allow its network in {SETTING}"
    return None


HOST_MAX = 253  # RFC 1035, written out without the final dot
LABEL_MAX = 63


def host_name_problem(host: str) -> str | None:
    """Why ``host`` cannot be a DNS name, or None. An internationalised label (non-ASCII, or
    an ``xn--`` A-label) must be valid IDNA 2008, as the HTTP layer encodes it; plain ASCII
    labels are left to the resolver, since self-hosted servers go by names such as
    ``vllm_server`` that are not strict host names but resolve."""
    name = host.removesuffix(".")  # one final dot is the fully qualified spelling
    if len(name) > HOST_MAX:
        return f"host is longer than {HOST_MAX} characters"
    for label in name.split("."):
        if not label:
            return f"host {host!r} has an empty label (two dots in a row, or a leading dot)"
        if len(label) > LABEL_MAX:
            return f"host label {label[:20]!r}… is longer than {LABEL_MAX} characters"
        if problem := _idna_problem(label):
            return f"host label {label!r} is not a valid internationalised name: {problem}"
    return None


def _idna_problem(label: str) -> str | None:
    try:
        if not label.isascii():
            idna.alabel(label)  # also refuses a label whose xn-- form, as sent, is too long
        elif label.lower().startswith("xn--"):
            idna.ulabel(label)
    except (idna.IDNAError, UnicodeError) as exc:
        return str(exc)
    return None


def destination(url: str) -> list[IPAddress]:
    """The addresses ``url``'s host resolves to now, each passing the policy: for checking an
    address when it is saved. Raises :class:`EgressRefused`, or :class:`NoAnswer` when the name
    does not resolve."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        return [ipaddress.ip_address(address) for address in checked_addresses(parts.hostname or "", port)]
    except httpcore2.ConnectError:
        raise NoAnswer(f"{parts.hostname} does not resolve") from None


def in_allowed_network(address: IPAddress) -> bool:
    """Whether staff allowed ``address``'s network explicitly (not merely: it is public)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return any(address in network for network in allowed_networks())


def checked_addresses(host: str, port: int) -> list[str]:
    """Resolve ``host`` once; every address must pass the policy, else nothing is connected."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise httpcore2.ConnectError(f"could not resolve {host}: {exc}") from exc
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    allowed = allowed_networks()
    for address in addresses:
        if not address_allowed(ipaddress.ip_address(address), allowed):
            raise EgressRefused(host, address)
    return addresses


class EgressBackend(httpcore2.NetworkBackend):
    """httpcore's network layer with the policy in front: connects to checked addresses only."""

    def __init__(self) -> None:
        self._sockets = httpcore2.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        error: Exception | None = None
        for address in checked_addresses(host, port):
            try:
                # An IP literal: the socket layer does not resolve it again.
                return self._sockets.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                error = exc
        assert error is not None  # getaddrinfo never answers with no address
        raise error

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.NetworkStream:
        raise httpcore2.ConnectError("unix sockets are not an egress route")

    def sleep(self, seconds: float) -> None:
        self._sockets.sleep(seconds)


class EgressTransport(httpx2.HTTPTransport):
    def __init__(self) -> None:
        # HTTPTransport takes no network backend, so its pool (its only state) is built here
        # with ours instead of by its __init__, which would also load a second TLS context.
        self._pool = httpcore2.ConnectionPool(
            ssl_context=httpx2.create_ssl_context(),
            max_connections=LIMITS.max_connections,
            max_keepalive_connections=LIMITS.max_keepalive_connections,
            keepalive_expiry=LIMITS.keepalive_expiry,
            network_backend=EgressBackend(),
        )


def http_client(timeout: httpx2.Timeout | float) -> httpx2.Client:
    """The HTTP client for every outbound call, also handed to the SDKs as ``http_client=``.

    - ``trust_env=False``: an HTTP(S)_PROXY / ALL_PROXY from the environment would make the
      proxy resolve and connect, out of the policy's sight; netrc credentials stay out too.
    - No redirects: following one would send the SDKs' key headers (``x-api-key``,
      ``api-key``) to wherever the endpoint points, which need not be where the key was saved
      for. A provider API does not redirect; a 3xx is reported as the provider's error.
    """
    return httpx2.Client(transport=EgressTransport(), timeout=timeout, trust_env=False, follow_redirects=False)


def refusal_in(exc: BaseException) -> EgressRefused | None:
    """The refusal behind an SDK's exception: the SDKs raise it as is or wrap it (Anthropic
    makes it the cause of an ``APIConnectionError``)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, EgressRefused):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


@dataclass(frozen=True)
class PostAnswer:
    """What a POST outside got back: enough to decide and to log, never the whole body."""

    status_code: int
    retry_after: str | None
    excerpt: str  # the first bytes of the body, decoded leniently


class NoAnswer(Exception):
    """The POST got no HTTP answer: name resolution, connection, TLS or a timeout failed.
    The message is the error's class only, never an address or a body."""


EXCERPT_BYTES = 200


def post(url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> PostAnswer:
    """POST ``body`` to ``url`` through the egress policy (checked where the socket opens), with
    no proxy and no redirect followed, reading at most ``EXCERPT_BYTES`` of the answer (an
    answer that never ends cannot hold the caller). For callers that need no SDK (webhook
    deliveries), so they never import the HTTP stack themselves.

    Raises :class:`EgressRefused` for a refused address and :class:`NoAnswer` for no answer."""
    try:
        with (
            http_client(httpx2.Timeout(timeout_s)) as client,
            client.stream("POST", url, content=body, headers=headers) as response,
        ):
            return PostAnswer(response.status_code, response.headers.get("retry-after"), _first_bytes(response))
    except Exception as exc:
        refused = refusal_in(exc)
        if refused is not None:
            raise refused from None
        if isinstance(exc, httpx2.HTTPError):
            raise NoAnswer(type(exc).__name__) from None
        raise


def _first_bytes(response: httpx2.Response) -> str:
    taken = b""
    for chunk in response.iter_bytes():
        taken += chunk
        if len(taken) >= EXCERPT_BYTES:
            break
    return taken[:EXCERPT_BYTES].decode("utf-8", "replace")
