"""The message catalogues: every sentence of the service translated into Russian and Estonian,
compiled, and chosen by Accept-Language on every endpoint."""

from __future__ import annotations

import gettext
import re
import string
from functools import cache
from pathlib import Path

import pytest
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_dir
from babel.messages.pofile import read_po
from flask.testing import FlaskClient

from service.i18n import (
    CATALOGUES,
    DECIMAL_COMMA,
    DOMAIN,
    LOCALES,
    Message,
    _,
    _n,
    localized,
    negotiate,
)
from service.kinds import KINDS

SERVICE = Path(__file__).resolve().parent.parent / "service"
TRANSLATED = ("ru", "et")
KEYWORDS = {**DEFAULT_KEYWORDS, "_n": (1, 2)}  # as `make translations` extracts them
PLURAL_FORMS = {"ru": 3, "et": 2}
CYRILLIC = re.compile("[а-яё]", re.IGNORECASE)


@cache  # read when a test first asks, not whenever the tests are collected
def extracted() -> dict[str | tuple[str, ...], str]:
    """Every sentence marked in the code, with where it is written."""
    found: dict[str | tuple[str, ...], str] = {}
    for filename, lineno, message, _comments, _context in extract_from_dir(
        str(SERVICE), method_map=[("**.py", "python")], keywords=KEYWORDS
    ):
        found[message] = f"service/{filename}:{lineno}"
    return found


def _placeholders(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def test_the_code_marks_sentences() -> None:
    assert len(extracted()) > 50
    assert "Correct." in extracted()
    assert "Unbalanced parenthesis" in extracted()  # the problem titles are translatable


@pytest.mark.parametrize("locale", TRANSLATED)
def test_every_sentence_has_a_translation(locale: str) -> None:
    """Fails for a sentence in the code that the catalogue lacks, leaves empty or marks fuzzy:
    run `make translations` and translate it in the .po file."""
    path = CATALOGUES / locale / "LC_MESSAGES" / f"{DOMAIN}.po"
    with path.open("rb") as file:
        catalogue = read_po(file, locale=locale)
    missing = []
    for message_id, where in extracted().items():
        key = message_id[0] if isinstance(message_id, tuple) else message_id
        entry = catalogue.get(key)
        strings = entry.string if entry is not None else None
        forms = strings if isinstance(strings, tuple) else (strings,)
        if entry is None or entry.fuzzy or not all(forms):
            missing.append(f"{where}: {key!r}")
    assert not missing, f"untranslated in {locale}:\n" + "\n".join(missing)


@pytest.mark.parametrize("locale", TRANSLATED)
def test_translations_keep_the_placeholders(locale: str) -> None:
    """A translation must name exactly the template's parameters, or rendering it would fail."""
    path = CATALOGUES / locale / "LC_MESSAGES" / f"{DOMAIN}.po"
    with path.open("rb") as file:
        catalogue = read_po(file, locale=locale)
    assert catalogue.num_plurals == PLURAL_FORMS[locale]
    for entry in catalogue:
        if not entry.id:
            continue
        ids = entry.id if isinstance(entry.id, tuple) else (entry.id,)
        strings = entry.string if isinstance(entry.string, tuple) else (entry.string,)
        expected = set().union(*map(_placeholders, ids))
        for translated in strings:
            assert _placeholders(translated) <= expected, (entry.id, translated)
            # Every parameter must appear in each translation, but a plural's count and a
            # character's Unicode name (English only: other languages give its code point).
            optional = {"count", "unicode_name"}
            assert expected - optional <= _placeholders(translated), (entry.id, translated)


@pytest.mark.parametrize("locale", TRANSLATED)
def test_the_compiled_catalogue_matches_the_translations(locale: str) -> None:
    """The .mo file the package ships is compiled from the current .po file."""
    with (CATALOGUES / locale / "LC_MESSAGES" / f"{DOMAIN}.po").open("rb") as file:
        catalogue = read_po(file, locale=locale)
    with (CATALOGUES / locale / "LC_MESSAGES" / f"{DOMAIN}.mo").open("rb") as file:
        compiled = gettext.GNUTranslations(file)
    for entry in catalogue:
        if not entry.id or entry.fuzzy:
            continue
        if isinstance(entry.id, tuple):
            plural = gettext.c2py(catalogue.plural_expr)
            for n in (1, 2, 5, 21):
                assert compiled.ngettext(*entry.id, n) == entry.string[plural(n)], entry.id
        else:
            assert compiled.gettext(entry.id) == entry.string, entry.id


def test_every_problem_title_is_translatable() -> None:
    for kind, (_status, title) in KINDS.items():
        assert isinstance(title, Message), kind
        assert title.translate("ru") != title or kind == "malformed-json", kind


def test_plural_forms_follow_each_language() -> None:
    template = (
        "{node} is used {count} time, and the contributions from every use add up "
        "(the += of the backward pass); this answer counts only one of them.",
        "{node} is used {count} times, and the contributions from every use add up "
        "(the += of the backward pass); this answer counts only one of them.",
    )
    russian = {n: _n(*template, n, node="a").translate("ru") for n in (1, 2, 5, 21, 22, 25)}
    assert "1 раз," in russian[1] and "21 раз," in russian[21]
    assert "2 раза" in russian[2] and "22 раза" in russian[22]
    assert "5 раз," in russian[5] and "25 раз," in russian[25]
    assert "1 kord " in _n(*template, 1, node="a").translate("et")
    assert "3 korda" in _n(*template, 3, node="a").translate("et")
    assert _n(*template, 1, node="a") == template[0].format(node="a", count=1)


def test_a_message_renders_its_parameters_in_every_language() -> None:
    message = _("The answer must be a number, not {what}.", what=_("an object"))
    assert message == "The answer must be a number, not an object."
    assert localized({"m": [message]}, "ru") == {"m": ["Ответ должен быть числом, а это объект."]}
    assert message.translate("et") == "Vastus peab olema arv, mitte objekt."
    assert message.translate("xx") == str(message)  # no catalogue: English


def test_the_languages_writing_decimal_commas_are_those_cldr_says() -> None:
    from babel.numbers import get_decimal_symbol

    assert {locale for locale in LOCALES if get_decimal_symbol(locale) == ","} == DECIMAL_COMMA


@pytest.mark.parametrize(
    ("accepted", "locale"),
    [
        ([], "en"),
        (["ru-RU", "en"], "ru"),
        (["et"], "et"),
        (["de", "et-EE"], "et"),
        (["fr", "*"], "en"),
        (["EN-gb"], "en"),
    ],
)
def test_negotiation(accepted: list[str], locale: str) -> None:
    assert negotiate(accepted) == locale


@pytest.mark.parametrize(
    ("header", "locale"),
    [
        (None, "en"),
        ("ru", "ru"),
        ("ru-RU,ru;q=0.9,en;q=0.8", "ru"),
        ("de-DE, et;q=0.5", "et"),
        ("en;q=0.4, et;q=0.9", "et"),
        ("fr", "en"),
        ("ru;q=0", "en"),
    ],
)
def test_accept_language_chooses_the_language_of_a_problem(
    client: FlaskClient, header: str | None, locale: str
) -> None:
    headers = {"Accept-Language": header} if header else {}
    body = {"expression": "(a + b * c", "bindings": {}}
    response = client.post("/v1/gradients", json=body, headers=headers)
    assert response.status_code == 422
    assert response.headers["Content-Language"] == locale
    assert "Accept-Language" in response.headers["Vary"]
    title = response.get_json()["title"]
    expected = {"en": "Unbalanced parenthesis", "ru": "Непарная скобка", "et": "Paaritu sulg"}
    assert title == expected[locale]


def test_every_endpoint_announces_its_language(client: FlaskClient) -> None:
    for response in (
        client.get("/healthz", headers={"Accept-Language": "et"}),
        client.get("/nowhere", headers={"Accept-Language": "et"}),
        client.post("/v1/exercises", json={"seed": 1}, headers={"Accept-Language": "et"}),
    ):
        assert response.headers["Content-Language"] == "et"
    missing = client.get("/nowhere", headers={"Accept-Language": "ru"}).get_json()
    assert missing["title"] == "Не найдено"


def test_feedback_and_exercises_speak_the_language_asked_for(client: FlaskClient) -> None:
    body = {
        "expression": "a * a",
        "bindings": {"a": 3},
        "answers": {"gradients": {"a": 3}},
    }
    for locale in TRANSLATED:
        result = client.post("/v1/check", json=body, headers={"Accept-Language": locale})
        feedback = result.get_json()["results"][1]["feedback"]
        assert feedback["code"] == "one_path_only"
        english = client.post("/v1/check", json=body).get_json()["results"][1]["feedback"]
        assert feedback["message"] != english["message"]
        assert bool(CYRILLIC.search(feedback["message"])) == (locale == "ru")
        exercise = client.post(
            "/v1/exercises",
            json={"seed": 5, "kind": "backward-pass"},
            headers={"Accept-Language": locale},
        ).get_json()
        assert bool(CYRILLIC.search(exercise["instructions"])) == (locale == "ru")
        assert all(
            bool(CYRILLIC.search(q["prompt"])) == (locale == "ru") for q in exercise["questions"]
        )


def test_sentences_run_together_are_each_translated(client: FlaskClient) -> None:
    """Generator 3's exercise through a relu adds a sentence to its instructions."""
    body = {"seed": 0, "level": 3, "kind": "derivative", "generator": 3}
    english = client.post("/v1/exercises", json=body).get_json()["instructions"]
    assert "write the derivative with each relu as it is at" in english
    for locale in TRANSLATED:
        headers = {"Accept-Language": locale}
        text = client.post("/v1/exercises", json=body, headers=headers).get_json()["instructions"]
        assert "relu is on" not in text and "Write the derivative" not in text, text
        relu_sentence = gettext.translation(DOMAIN, CATALOGUES, languages=[locale]).gettext(
            "Where a relu is on (its input positive) its local derivative is 1, elsewhere "
            "0: write the derivative with each relu as it is at {bindings}."
        )
        assert relu_sentence.split("{")[0] in text, text


def test_schema_violations_are_translated_too(client: FlaskClient) -> None:
    body = {"granularity": "x", "zz": 1}
    problem = client.post("/v1/gradients", json=body, headers={"Accept-Language": "et"}).get_json()
    details = {error["pointer"]: error["detail"] for error in problem["errors"]}
    assert details == {
        "/expression": "Kohustuslik väli puudub.",
        "/granularity": "Lubatud väärtused: operator, primitive.",
        "/zz": "Tundmatu väli.",
    }
    assert problem["detail"].endswith("(ja veel 2)")
    english = client.post("/v1/gradients", json=body).get_json()
    assert english["detail"].endswith("(and 2 more)")
    assert {error["detail"] for error in english["errors"]} >= {"Missing data for required field."}


@pytest.mark.parametrize("answer", ["[10]", '{"x": 1}', "true", "NaN"])
def test_an_answer_that_is_no_number_is_named_in_good_russian(
    client: FlaskClient, answer: str
) -> None:
    """ "а не" would want the instrumental ("а не списком"); the kind is named in the nominative,
    so the Russian sentence must not set it after "а не"."""
    body = '{"expression": "a * b", "bindings": {"a": 2, "b": 3}, "answers": {"value": %s}}'
    messages = {}
    for locale in ("en", *TRANSLATED):
        headers = {"Accept-Language": locale, "Content-Type": "application/json"}
        response = client.post("/v1/check", data=body % answer, headers=headers)
        (result,) = [r for r in response.get_json()["results"] if r["item"] == "value"]
        assert result["feedback"]["code"] == "not_a_number"
        messages[locale] = result["feedback"]["message"]
    assert messages["en"].startswith("The answer must be a number, not ")
    assert messages["ru"].startswith("Ответ должен быть числом, а это ")
    assert "а не" not in messages["ru"]
    assert messages["et"].startswith("Vastus peab olema arv, mitte ")


@pytest.mark.parametrize(
    ("body", "content_type", "status"),
    [
        (b"", "application/json", 400),
        (b"{", "application/json", 400),
        (b"{}", "text/plain", 415),
        (b"{}", None, 415),
    ],
)
def test_a_body_that_is_no_json_is_refused_in_the_requests_language(
    client: FlaskClient, body: bytes, content_type: str | None, status: int
) -> None:
    response = client.post(
        "/v1/gradients", data=body, content_type=content_type, headers={"Accept-Language": "ru"}
    )
    assert response.status_code == status
    assert CYRILLIC.search(response.get_json()["detail"])
