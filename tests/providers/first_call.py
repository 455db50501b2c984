"""Run as a fresh process by test_first_call_latency.py: the first two calls of one arm
through the gateway (the process's very first, then a warm one), their timings as JSON.

    python -m tests.providers.first_call ORG_ID PROVIDER MODEL
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "prbench.settings_test")
    import django

    django.setup()
    from providers import gateway
    from providers.types import ArmSpec
    from tests.providers.contracts import FAST, REQUEST

    org_id, provider, model = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    timings = []
    for _ in range(2):
        completion = gateway.complete(org_id, ArmSpec(provider, model, FAST), REQUEST)
        timings.append(
            {
                "latency_ms": completion.latency_ms,
                "first_token_ms": completion.first_token_ms,
                "wall_ms": completion.wall_ms,
            }
        )
    print(json.dumps(timings))


if __name__ == "__main__":
    main()
