"""drain.core.credentials: what a message shows of an endpoint, and what is masked everywhere."""

from __future__ import annotations

import pytest

from drain.core import credentials
from drain.core.credentials import MASK, safe_endpoint
from drain.core.redact import redact


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://127.0.0.1:4318/otlp?api_key=OTLPKEY111", "http://127.0.0.1:4318/otlp"),
        ("https://u:pw@collector.example/v1/traces#frag", "https://collector.example/v1/traces"),
        ("http://gateway:9091/push/OTLPKEY111abc", f"http://gateway:9091/push/{MASK}"),
        ("http://gateway:9091/a/k7x9q2m4/b", f"http://gateway:9091/a/{MASK}/b"),
        ("https://o1.ingest.sentry.io/4507123", "https://o1.ingest.sentry.io/4507123"),
        ("http://h/eu-west-1/v2/otlp", "http://h/eu-west-1/v2/otlp"),
        ("http://h/%41bc", f"http://h/{MASK}"),
        ("http://[::1]:4318/v1/traces", "http://[::1]:4318/v1/traces"),
        ("collector:4318", "collector:4318"),
        ("http://h:43l8", "<not a URL, not shown>"),
    ],
)
def test_an_endpoint_shows_without_query_userinfo_or_tokens(url: str, shown: str) -> None:
    assert safe_endpoint(url) == shown


def test_the_tokens_are_masked_wherever_drain_prints(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
    monkeypatch.setenv("SENTRY_DSN", f"https://{key}@o1.ingest.sentry.io/42")
    monkeypatch.setenv(
        "OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20sk-live-5521,x-team=acme-prod"
    )
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/otlp?region=eu&token=abcd")
    credentials.remember("http://gateway:9091/push/PGWKEY7781zq")
    text = redact(
        f"key {key}; Bearer sk-live-5521 acme-prod; token=abcd; /push/PGWKEY7781zq; public.jobs eu"
    )
    # Header values are secret whatever they look like; a plain query value is not.
    assert text == f"key {MASK}; {MASK} {MASK}; token={MASK}; /push/{MASK}; public.jobs eu"
