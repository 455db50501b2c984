from __future__ import annotations

import time
from typing import TYPE_CHECKING, ClassVar

from providers.adapters.config import COMMON_KEYS, Setting, config_key_errors, solver_errors
from providers.types import ArmSpec, Completion, CompletionRequest

if TYPE_CHECKING:
    from providers.models import Price
    from providers.policy import ResolvedCredential


class Adapter:
    """One provider. Subclasses implement ``generate`` and declare the arm settings they
    read in ``config_keys`` (see providers/adapters/config.py).

    The gateway creates one instance per attempt, so an adapter may keep per-attempt state
    (the mock counts its tries). Adapters raise ``ProviderError`` for every failure.
    """

    name: ClassVar[str]
    needs_credential: ClassVar[bool] = False
    uses_credential: ClassVar[bool] = True  # the mock never looks one up
    # False for an arm whose answers never leave the platform (a replay): the allowlist says
    # where an organisation's prompts may be sent, so it has nothing to say about such an arm.
    sends_requests: ClassVar[bool] = True
    # False for an arm that answers a task whole by itself (a replay, a team's agent service):
    # the agent solver's loop has no turns of it to drive.
    can_be_agent: ClassVar[bool] = True
    # Every arm setting this adapter, the gateway or the request builder reads, with its check.
    config_keys: ClassVar[dict[str, Setting]] = COMMON_KEYS
    # What "Test connection" asks when the user names no model: a cheap one still served.
    test_model: ClassVar[str] = "default"

    def __init__(self, arm: ArmSpec, credential: ResolvedCredential | None = None):
        self.arm = arm
        self.credential = credential
        # When the whole call (every try, every wait) must be over, on time.monotonic();
        # set by the gateway. HTTP adapters cap each try's timeouts to what is left.
        self.deadline: float | None = None

    def seconds_left(self) -> float | None:
        return None if self.deadline is None else max(0.001, self.deadline - time.monotonic())

    def warm(self) -> None:
        """Build what the adapter's first call would otherwise build inside its timing (an SDK
        client, the SDK modules it imports on first use). The gateway calls it when it
        prepares an arm, before any call is timed; it may raise ``ProviderError`` for a
        credential the call would refuse anyway, which the gateway leaves to the call."""

    def generate(self, request: CompletionRequest) -> Completion:
        raise NotImplementedError

    def billed_output_tokens(self, request: CompletionRequest) -> int:
        """The most output tokens this request, as this adapter sends it, can be billed for:
        what the gateway reserves a budget for. Adapters that send a body read it from that
        body (``config.billed_output_tokens``), so no setting asks for more than is reserved."""
        return request.max_output_tokens

    @classmethod
    def call_seconds(cls, config: dict) -> float | None:
        """How long a whole call may take, every try and wait included, when the adapter's own
        setting says (an agent service's ``deadline_s``); None: the gateway's
        ``timeout_total_s`` and ``retry_deadline_s`` say."""
        return None

    @classmethod
    def served_model(cls, model_name: str, deployments: dict[str, str]) -> str:
        """The model that answers an arm's calls: what its parameters follow and its price is
        looked up by. The arm's own model name, except where a credential's deployment list
        says what a name serves (Azure)."""
        return model_name

    @classmethod
    def configured_price(cls, config: dict) -> Price | None:
        """The price an arm's own settings give its calls, for adapters that price
        themselves (the mock); None: the price catalog's, if it has one."""
        return None

    @classmethod
    def config_errors(cls, model_name: str, config: dict) -> list[str]:
        """Problems with an arm's settings, each naming the offending field."""
        return config_key_errors(cls.name, cls.config_keys, config) + solver_errors(config, cls.can_be_agent, cls.name)
