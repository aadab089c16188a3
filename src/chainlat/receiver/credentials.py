"""Credentials taken out of what an application sends, before the receiver writes it.

chainlat's own spans never hold a credential; another program's may: an HTTP
instrumentation that records request headers (``http.request.header.authorization``), a
URL with a password or a key in its query (``url.full``). The receiver's file is read
again by ``check`` and ``report``, and kept; those values are replaced by ``[REDACTED]``
before it is written. Only attributes whose key says they hold a header or a URL are
looked at: a full-text scrub of every value would cap how fast the receiver takes data,
and a credential-looking word in any other key (``llm.token_count.prompt``) names a count.
"""

from __future__ import annotations

from typing import Any, Final

from chainlat._core.model_routes import URL_KEYS
from chainlat._core.redact import REDACTED, is_secret_header, scrub_url

_HEADER_PREFIXES: Final = ("http.request.header.", "http.response.header.")
_URL_KEYS: Final = frozenset(URL_KEYS)


def remove_credentials(document: dict[str, Any]) -> None:
    """Redact, in place, the credential headers and URL secrets of an OTLP JSON request."""
    for resource_spans in _list(document.get("resourceSpans")):
        if not isinstance(resource_spans, dict):
            continue
        resource = resource_spans.get("resource")
        if isinstance(resource, dict):
            _attributes(resource.get("attributes"))
        for scope_spans in _list(resource_spans.get("scopeSpans")):
            if not isinstance(scope_spans, dict):
                continue
            for span in _list(scope_spans.get("spans")):
                if not isinstance(span, dict):
                    continue
                _attributes(span.get("attributes"))
                for item in (*_list(span.get("events")), *_list(span.get("links"))):
                    if isinstance(item, dict):
                        _attributes(item.get("attributes"))


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _attributes(attributes: object) -> None:
    for attribute in _list(attributes):
        if not isinstance(attribute, dict):
            continue
        key = attribute.get("key")
        if not isinstance(key, str):
            continue
        if key.startswith(_HEADER_PREFIXES):
            if is_secret_header(key.rsplit(".", 1)[-1]):
                attribute["value"] = {"stringValue": REDACTED}
        elif key in _URL_KEYS:
            value = attribute.get("value")
            if isinstance(value, dict) and isinstance(value.get("stringValue"), str):
                value["stringValue"] = scrub_url(value["stringValue"])
