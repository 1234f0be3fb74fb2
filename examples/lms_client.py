"""Play an LMS against a running autograd-service: fetch an exercise, submit a learner's wrong
answer, then the right one, and print the feedback in English, Russian and Estonian.

    make serve                                  # in another terminal (port 8000)
    python examples/lms_client.py               # or: --url http://127.0.0.1:8000 --seed 7

Only the standard library is used, as a plugin written in any language would only need HTTP.
"""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request
from typing import Any

LANGUAGES = ("en", "ru", "et")


def post(url: str, path: str, body: dict[str, Any], language: str = "en") -> dict[str, Any]:
    """POST a JSON body; a problem (4xx) is returned as its document, like a success."""
    if not url.startswith(("http://", "https://")):
        raise SystemExit(f"the service URL must be http:// or https://, not {url!r}")
    request = urllib.request.Request(  # noqa: S310 - the scheme is checked above
        url.rstrip("/") + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Accept-Language": language},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return json.load(response)
    except urllib.error.HTTPError as error:
        return json.load(error)


def show_feedback(url: str, exercise: dict[str, Any], answers: dict[str, Any]) -> None:
    """Submit the answers once per language and print each item's feedback in all three."""
    body = {"expression": exercise["expression"], "bindings": exercise["bindings"]}
    by_language = {
        language: post(url, "/v1/check", {**body, "answers": answers}, language)
        for language in LANGUAGES
    }
    asked = {question["item"] for question in exercise["questions"]}
    print(f"  score: {by_language['en']['score']:.2f}")
    for index, result in enumerate(by_language["en"]["results"]):
        if result["item"] not in asked:
            continue
        print(f"  {result['item']}: {result['verdict']} ({result['feedback']['code']})")
        for language in LANGUAGES:
            message = by_language[language]["results"][index]["feedback"]["message"]
            print(f"    [{language}] {message}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the service's base URL")
    parser.add_argument("--seed", type=int, default=2026, help="the learner's seed")
    parser.add_argument("--level", type=int, default=2, choices=(1, 2, 3))
    arguments = parser.parse_args()

    # 1. Fetch the learner's exercise. The LMS's server keeps the key (`reveal: true`); the
    #    learner's page gets the same exercise without it.
    request = {"seed": arguments.seed, "level": arguments.level, "kind": "gradients"}
    key = post(arguments.url, "/v1/exercises", {**request, "reveal": True})
    for language in LANGUAGES:
        shown = post(arguments.url, "/v1/exercises", request, language)
        print(f"[{language}] {shown['instructions']}")
        for question in shown["questions"]:
            print(f"       {question['prompt']}")
    print()

    # 2. A first attempt: every gradient with its sign flipped (0 stays wrong as 1).
    right = key["answers"]
    wrong = {
        group: {item: -value if value else 1.0 for item, value in answers.items()}
        for group, answers in right.items()
    }
    print(f"First attempt: {json.dumps(wrong)}")
    show_feedback(arguments.url, key, wrong)
    print()

    # 3. The second attempt, right this time.
    print(f"Second attempt: {json.dumps(right)}")
    show_feedback(arguments.url, key, right)


if __name__ == "__main__":
    main()
