"""The body limit is the same whether a body comes with a Content-Length or chunked."""

from __future__ import annotations

import io
import json

import pytest

from service.app import create_app

LIMIT = 1024
LESSON = json.dumps({"expression": "(a + b) * c", "bindings": {"a": 2, "b": -3, "c": 10}}).encode()


@pytest.mark.parametrize(("size", "status"), [(LIMIT - 1, 200), (LIMIT, 200), (LIMIT + 1, 413)])
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_of_exactly_the_limit_is_accepted(size: int, status: int, chunked: bool) -> None:
    client = create_app({"TESTING": True, "MAX_BODY_BYTES": LIMIT}).test_client()
    body = LESSON.ljust(size)  # JSON followed by spaces: the same document at every size
    headers = {"Content-Type": "application/json"}
    if chunked:  # as gunicorn hands a chunked body over: no length, the stream ends it
        response = client.post(
            "/v1/gradients",
            input_stream=io.BytesIO(body),
            headers={**headers, "Transfer-Encoding": "chunked"},
            environ_overrides={"wsgi.input_terminated": True},
        )
    else:
        response = client.post("/v1/gradients", data=body, headers=headers)
    assert response.status_code == status, response.get_data()[:200]
    if status == 413:
        assert response.get_json()["type"].endswith("/body-too-large")
