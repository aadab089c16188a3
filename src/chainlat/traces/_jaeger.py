"""Jaeger's HTTP query API as a trace source: api/v3 (OTLP/JSON), falling back to /api/traces."""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from chainlat._core.errors import InputError, TraceSourceError
from chainlat._core.runs import WorkflowRun
from chainlat._net import fetch

if TYPE_CHECKING:
    import httpx

from chainlat.traces._assemble import Assembler, ReadCounters, Trace, runs_of
from chainlat.traces._jaeger_json import jaeger_trace, jaeger_traces
from chainlat.traces._parse import (
    BadSpan,
    Parsed,
    loads_lenient,
    otlp_spans,
    tally,
)

DEFAULT_TIMEOUT_S: Final = 60.0
"""The longest a read of Jaeger takes, every request and byte of it (``--timeout``)."""
DEFAULT_MAX_RESPONSE_BYTES: Final = 256 * 1024 * 1024
"""The largest answer read, decompressed (``--max-response-bytes``)."""

# --- Jaeger's HTTP API -----------------------------------------------------------------------

_LOOKBACK_RE: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_LOOKBACK_UNIT_S: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_lookback(text: str) -> dt.timedelta:
    """``"30m"``, ``"1h"``, ``"2d"`` as a timedelta."""
    match = _LOOKBACK_RE.match(text)
    if match is None:
        raise InputError(f"--lookback {text!r}: expected a duration like 30m, 1h or 2d")
    try:
        return dt.timedelta(seconds=float(match.group(1)) * _LOOKBACK_UNIT_S[match.group(2)])
    except OverflowError:
        raise InputError(f"--lookback {text!r}: too long a duration") from None


class JaegerSource:
    """Traces of one service from Jaeger's HTTP query API.

    Asks ``/api/v3/traces`` (OTLP/JSON) and falls back to ``/api/traces`` when the
    Jaeger has no api/v3. The answer is fetched once and kept, so the source can be
    read again.

    Example::

        source = JaegerSource("http://localhost:16686", "support-bot", lookback="1h", limit=500)
        runs = list(source.runs())
    """

    def __init__(
        self,
        url: str,
        service: str,
        *,
        lookback: str | dt.timedelta = "1h",
        limit: int = 100,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.service = service
        self.name = f"{self.url} (service {service})"
        self.lookback = parse_lookback(lookback) if isinstance(lookback, str) else lookback
        if limit < 1:
            raise InputError(f"--limit {limit}: expected a positive number of traces")
        self.limit = limit
        if not timeout_s > 0:
            raise InputError(f"--timeout {timeout_s}: expected a positive number of seconds")
        self.timeout_s = timeout_s
        """The whole read: every request, the fallback and every byte of the answers."""
        self.max_response_bytes = max_response_bytes
        self._transport = transport
        self._spans: list[Parsed] | None = None
        self.api: str | None = None
        """``v3`` or ``v1``: which API answered."""
        self.returned = 0
        """Traces in Jaeger's answer, once fetched."""

    def runs(self, counters: ReadCounters | None = None) -> Iterator[WorkflowRun]:
        """The runs of the traces Jaeger returned."""
        counters = counters if counters is not None else ReadCounters()
        yield from runs_of(self.traces(counters), counters)

    def traces(self, counters: ReadCounters | None = None) -> Iterator[Trace]:
        """The traces Jaeger returned, each whole."""
        counters = counters if counters is not None else ReadCounters()
        if self._spans is None:
            nonfinite, negative = tally.nonfinite_values, tally.negative_spans
            try:
                self._spans = self._fetch()
                self.returned = len({trace_id for trace_id, _, _ in self._spans})
            finally:
                counters.nonfinite_values += tally.nonfinite_values - nonfinite
                tally.dropped_since(counters, negative)
        assembler = Assembler(counters, 0, 1)
        yield from assembler.add_whole(self._spans)

    @property
    def limit_reached(self) -> bool:
        """Jaeger returned as many traces as ``limit`` asks for: there may be more, unread."""
        return self.returned >= self.limit

    def _fetch(self) -> list[Parsed]:
        import httpx

        end = dt.datetime.now(dt.UTC)
        try:
            start = end - self.lookback
        except OverflowError:
            start = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)  # "everything"
        start = max(start, dt.datetime(1970, 1, 1, tzinfo=dt.UTC))
        deadline = time.monotonic() + self.timeout_s
        try:
            with httpx.Client(transport=self._transport) as client:
                v3 = self._get(
                    client,
                    deadline,
                    f"{self.url}/api/v3/traces",
                    params={
                        "query.service_name": self.service,
                        "query.start_time_min": _rfc3339(start),
                        "query.start_time_max": _rfc3339(end),
                        "query.num_traces": str(self.limit),
                        "query.search_depth": str(self.limit),
                    },
                )
                body = _json_body(v3.content)
                if v3.status_code == 200 and isinstance(body, dict):
                    self.api = "v3"
                    return self._otlp(body.get("result", body))
                if v3.status_code == 404 and _is_gateway_error(body):
                    self.api = "v3"
                    return []  # api/v3 answers 404 "No traces found"
                if v3.status_code not in (404, 405, 501) and v3.status_code >= 400:
                    raise TraceSourceError(f"{self.name}: {_http_problem(v3, body)}")
                v1 = self._get(
                    client,
                    deadline,
                    f"{self.url}/api/traces",
                    params={
                        "service": self.service,
                        "start": str(int(start.timestamp() * 1e6)),
                        "end": str(int(end.timestamp() * 1e6)),
                        "lookback": _lookback_text(self.lookback),
                        "limit": str(self.limit),
                    },
                )
                body = _json_body(v1.content)
                self.api = "v1"
                if v1.status_code == 404:
                    return []  # a service Jaeger has never seen
                if v1.status_code != 200 or not isinstance(body, dict):
                    raise TraceSourceError(f"{self.name}: {_http_problem(v1, body)}")
                traces = jaeger_traces(body)
                if traces is None:
                    raise TraceSourceError(f"{self.name}: /api/traces: unexpected answer")
                spans: list[Parsed] = []
                for index, trace in enumerate(traces):
                    spans.extend(jaeger_trace(trace, f"data[{index}]", self.url))
                return spans
        except httpx.TimeoutException:
            raise self._timed_out() from None
        except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError) as exc:
            detail = " ".join(str(exc).split()) or type(exc).__name__
            raise TraceSourceError(f"{self.name}: cannot reach Jaeger: {detail}") from None
        except BadSpan as exc:
            raise TraceSourceError(f"{self.name}: {exc}") from None
        except RecursionError:
            raise TraceSourceError(f"{self.name}: the answer is nested too deep") from None

    def _too_big(self, path: str) -> TraceSourceError:
        return TraceSourceError(
            f"{self.name}: {path}: the answer is over {self.max_response_bytes} bytes "
            "(decompressed); ask for fewer traces (--limit, --lookback) or raise "
            "--max-response-bytes"
        )

    def _timed_out(self) -> TraceSourceError:
        return TraceSourceError(
            f"{self.name}: timed out: Jaeger did not answer in full within {self.timeout_s:g} s; "
            "raise --timeout"
        )

    def _get(
        self, client: httpx.Client, deadline: float, url: str, params: Mapping[str, str]
    ) -> httpx.Response:
        """GET ``url`` within ``deadline`` (all of it: connecting, waiting, every byte), with
        at most ``max_response_bytes`` of answer once decompressed."""
        return fetch(
            client,
            "GET",
            url,
            params=params,
            deadline=deadline,
            max_bytes=self.max_response_bytes,
            timed_out=self._timed_out,
            too_big=lambda: self._too_big(_path(url)),
            where=f"{self.name}: {_path(url)}",
        )

    def _otlp(self, doc: object) -> list[Parsed]:
        if not isinstance(doc, dict):
            raise TraceSourceError(f"{self.name}: /api/v3/traces: unexpected answer")
        if "resourceSpans" not in doc:
            return []
        return list(otlp_spans(doc, self.url))


def _rfc3339(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _lookback_text(delta: dt.timedelta) -> str:
    seconds = int(delta.total_seconds())
    return f"{seconds // 3600}h" if seconds % 3600 == 0 else f"{max(seconds // 60, 1)}m"


def _path(url: str) -> str:
    """The path of ``url`` (``/api/traces``), for messages."""
    try:
        return urlsplit(url).path
    except ValueError:
        return url


def _json_body(content: bytes) -> object:
    try:
        return loads_lenient(content)
    except ValueError:
        return None


def _is_gateway_error(body: object) -> bool:
    return isinstance(body, dict) and isinstance(body.get("error"), dict)


def _http_problem(response: httpx.Response, body: object) -> str:
    detail = ""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            detail = str(error.get("message", ""))
        elif isinstance(body.get("errors"), list) and body["errors"]:
            detail = str(body["errors"][0])
    if not detail:
        detail = " ".join(response.text.split())[:200]
    return (
        f"{response.request.url.path}: HTTP {response.status_code}{': ' + detail if detail else ''}"
    )
