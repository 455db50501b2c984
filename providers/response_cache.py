"""When two requests are the same request, for the opt-in response cache.

Only a request at temperature exactly 0 is cacheable: with any other temperature (or none,
which is the provider's default, not 0) a second call is meant to give another sample. The
key is a sha256 of a canonical JSON of everything that shapes the answer, so the store never
has to hold or compare the prompts themselves.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from providers.adapters.config import answer_config
from providers.types import ArmSpec, CompletionRequest, Message


def cacheable(request: CompletionRequest) -> bool:
    return request.temperature is not None and request.temperature == 0


def response_cache_key(org_id: int, arm: ArmSpec, request: CompletionRequest) -> str | None:
    """The request's key within its organisation, or None when it may not be cached.

    ``arm`` is the arm as the gateway prepared it (its config already the adapter's
    declared keys only). The credential's name is part of the key: two credentials of one
    provider may reach different endpoints serving different models under one name. The
    seed and the task's reference answer are not: they are not what a model is asked.
    """
    if not cacheable(request):
        return None
    normalised = {
        "org": org_id,
        "provider": arm.provider,
        "model": arm.model_name,
        "credential": arm.credential,
        "config": answer_config(arm.config),
        "system": request.system,
        "messages": [_message_key(message) for message in request.messages],
        "max_output_tokens": request.max_output_tokens,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "stop": list(request.stop),
        "response_schema": request.response_schema,
        "response_schema_name": request.response_schema_name if request.response_schema is not None else None,
    }
    if request.tools:  # only then, so a plain request keeps the key it was stored under
        normalised["tools"] = [[tool.name, tool.description, tool.parameters] for tool in request.tools]
    return hashlib.sha256(canonical_json(normalised).encode()).hexdigest()


def _message_key(message: Message) -> list:
    """A message's role and text, and an agent's tool calls and results when it has any (a
    plain message keeps the key it had before agents)."""
    key: list = [message.role, message.content]
    if message.tool_calls or message.tool_results:
        key.append([[call.id, call.name, call.arguments, call.malformed] for call in message.tool_calls])
        key.append([[result.call_id, result.content, result.is_error] for result in message.tool_results])
    return key


def canonical_json(value: Any) -> str:
    """One spelling of a JSON value: keys sorted, no spaces, every number a float. What two
    arms of two runs are compared by (leaderboards' cross-run matching) as well as requests."""
    return json.dumps(_numbers_as_floats(value), sort_keys=True, separators=(",", ":"))


def _numbers_as_floats(value: Any) -> Any:
    """``temperature: 0`` and ``temperature: 0.0`` ask the same thing; JSON writes them apart."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, dict):
        return {str(k): _numbers_as_floats(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_numbers_as_floats(v) for v in value]
    return value
