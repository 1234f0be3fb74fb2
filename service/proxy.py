"""The problem documents the proxy in front of the service answers itself, in every language.

nginx refuses some requests before the app sees them (a body over its limit, a client too fast or
too slow to send) and answers for a replica that failed or did not answer in time. Those answers
are problem documents of the service's own kinds, in the language the request asks for, like the
app's: this module renders them as nginx configuration from the kinds' titles and the sentences
below, which the catalogues translate. `python -m service.proxy deploy/nginx/errors.conf` writes
the file (`make translations` does, after the catalogues); a test holds the file to this rendering.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

from service.i18n import DEFAULT_LOCALE, LOCALES, Message, _, localized
from service.kinds import KINDS, PROXY_KINDS, type_uri

# Where nginx finds each answer: an internal location, never reachable from outside. (A named
# location cannot answer an error in the request line itself: nginx has no URI to hand it.)
PAGES = "/autograd-problems/"


_KINDS = {**KINDS, **PROXY_KINDS}


@dataclass(frozen=True)
class ProxyAnswer:
    """What nginx answers for the statuses `statuses`: a problem of `kind`, from the internal
    location `PAGES + kind`."""

    statuses: tuple[int, ...]
    kind: str
    detail: Message
    retry_after: int | None = None  # seconds, for what passes if the client waits

    @property
    def status(self) -> int:
        return _KINDS[self.kind][0]

    def document(self, locale: str) -> dict[str, object]:
        status, title = _KINDS[self.kind]
        problem = {"type": type_uri(self.kind), "title": title, "status": status}
        return {**localized(problem, locale), "detail": self.detail.translate(locale)}


ANSWERS = (
    # 494: request headers too large, which nginx answers as a 400; 414: a URI too long, 501: a
    # transfer coding it does not speak, 505: an HTTP version it does not, answered as 400s too
    ProxyAnswer(
        (400, 494, 414, 501, 505),
        "bad-request",
        _(
            "the request could not be read: its request line, headers or body encoding are "
            "malformed, or its headers too large"
        ),
    ),
    # nginx's own: its pages' locations asked for from outside, or a path it keeps (/metrics)
    ProxyAnswer(
        (404,),
        "not-found",
        _("nothing is at this path; the API is described at /docs"),
    ),
    # a method nginx refuses before any location (TRACE)
    ProxyAnswer(
        (405,),
        "method-not-allowed",
        _("this method is not allowed; the API takes GET, POST and OPTIONS"),
    ),
    ProxyAnswer(
        (408,),
        "request-timeout",
        _("the request did not arrive in time; send it again, all at once"),
    ),
    ProxyAnswer(
        (413,),
        "body-too-large",
        _(
            "the request body is larger than this service accepts; "
            "GET /v1/operations gives the limit"
        ),
    ),
    ProxyAnswer(
        (429,),
        "too-many-requests",
        _(
            "too many requests from this address at once or in a short time; slow down and try "
            "again"
        ),
        retry_after=1,
    ),
    ProxyAnswer(
        (500,),
        "internal-error",
        _("the proxy failed unexpectedly; the request id identifies the failure in its logs"),
    ),
    ProxyAnswer(
        (502,),
        "bad-gateway",
        _("the service stopped before it answered; try again"),
        retry_after=1,
    ),
    ProxyAnswer(
        (503,),
        "service-busy",
        _("the service cannot take the request now; try again shortly"),
        retry_after=1,
    ),
    ProxyAnswer(
        (504,),
        "gateway-timeout",
        _("the service did not answer in time; try again with a smaller request"),
        retry_after=5,
    ),
)


def first_spoken(locale: str) -> str:
    """A regular expression (PCRE, as nginx's, and Python's) for an Accept-Language header whose
    first language the service speaks is `locale`: the tags before it name other languages.

    A language given `q=0` is not acceptable, so it is passed over. The app orders the rest by
    their qualities too (service.i18n.negotiate); clients list languages in order of preference,
    so the first is the one they prefer."""
    primary = r"(?![a-z0-9])"  # `ru`, `ru-RU`, `ru_RU`, `ru;q=0.8`; not `rue`
    refused = r"[^,]*;\s*q\s*=\s*0(?:\.0*)?\s*(?:,|$)"  # `ru;q=0`: not acceptable at all
    spoken = "|".join(LOCALES)
    other = rf"\s*(?:(?!(?:{spoken}){primary})[^,]*,|(?={refused})[^,]*,)"
    return rf"^(?:{other})*\s*{locale}{primary}(?!{refused})"


def _quoted(text: str) -> str:
    """`text` as a single-quoted nginx string: nginx reads `\\\\` and `\\'` as escapes."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _body(answer: ProxyAnswer, locale: str) -> str:
    document = {**answer.document(locale), "request_id": "$request_id"}
    body = json.dumps(document, ensure_ascii=False)
    if "$" in body.replace("$request_id", ""):  # nginx would read it as a variable
        raise ValueError(f"a '$' in the {locale} answer for {answer.kind}")
    return _quoted(body)


_HEADER = """\
# problem+json answers for nginx's own errors: include this file in each `server` block that
# proxies the API. The app answers its own refusals as RFC 9457 problems; these cover what nginx
# refuses or cannot pass on (a client limit, a timeout, a replica that died mid-request), so a
# client never sees an HTML error page. Each `type` is one of the service's problem types
# (service/kinds.py). Upstream answers pass through unchanged (proxy_intercept_errors off):
# the app's own 413, 500 and 503 keep their details. `request_id` is nginx's id of the request.
#
# Each answer is in the language the request's Accept-Language puts first among those the service
# speaks ({locales}), else in English, with Content-Language saying which.
# Rendered by `python -m service.proxy deploy/nginx/errors.conf` from service/proxy.py and the
# catalogues: change those, not this file.
"""


def render() -> str:
    """deploy/nginx/errors.conf."""
    lines = [_HEADER.format(locales=", ".join(LOCALES))]
    for answer in ANSWERS:
        for status in answer.statuses:  # `=400`: a status answered as another is sent as that
            code = "" if status == answer.status else f"={answer.status} "
            lines.append(f"error_page {status} {code}{PAGES}{answer.kind};")
    for answer in ANSWERS:
        lines += ["", f"location = {PAGES}{answer.kind} {{"]
        lines += [
            "    internal;",
            "    default_type application/problem+json;",
            "    add_header X-Request-ID $request_id always;",
        ]
        if answer.retry_after is not None:
            lines.append(f"    add_header Retry-After {answer.retry_after} always;")
        lines += [
            "    add_header Content-Language $problem_language always;",
            "    add_header Vary Accept-Language always;",
            f"    set $problem_language {DEFAULT_LOCALE};",
        ]
        for locale in LOCALES:
            if locale == DEFAULT_LOCALE:
                continue
            lines += [
                f'    if ($http_accept_language ~* "{first_spoken(locale)}") {{',
                f"        set $problem_language {locale};",
                f"        return {answer.status} {_body(answer, locale)};",
                "    }",
            ]
        lines += [f"    return {answer.status} {_body(answer, DEFAULT_LOCALE)};", "}"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    rendered = render()
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w", encoding="utf-8") as file:
            file.write(rendered)
    else:
        sys.stdout.write(rendered)
