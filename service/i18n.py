"""Sentences a learner reads: marked for translation where they are written, rendered per request.

A `Message` is the English sentence itself (a `str`, so the core and its tests read it as text)
that also remembers its template and parameters. The HTTP layer renders it again in the language
the client asked for, from the gettext catalogues under `service/translations/`.

Mark a sentence with `_("division by zero: {divisor} is 0", divisor=text)`: one whole sentence per
template, parameters by name, so a translator can reorder them. A sentence about a count is
marked with `_n("{count} path", "{count} paths", count)`: Russian has three plural forms and
Estonian two, and the catalogue's plural rule picks the right one. `pybabel extract` finds every
`_` and `_n` (`make translations` runs extract, update and compile).
"""

from __future__ import annotations

import gettext
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

LOCALES = ("en", "ru", "et")  # English is the source language and the fallback
DEFAULT_LOCALE = "en"
DECIMAL_COMMA = frozenset(("ru", "et"))  # the languages that write 0,5 (CLDR's decimal symbol)
DOMAIN = "messages"
CATALOGUES = Path(__file__).parent / "translations"


class Message(str):
    """An English sentence that can be rendered again in another language."""

    template: str
    plural: str | None  # the plural template of a sentence about `count`, else None
    number: int | None  # the count a plural sentence is about
    params: dict[str, Any]

    def __new__(cls, template: str, /, **params: Any) -> Message:
        return cls._make(template, None, None, params)

    @classmethod
    def counted(cls, singular: str, plural: str, count: int, /, **params: Any) -> Message:
        """A sentence about `count` things; `{count}` in the templates is the number."""
        return cls._make(singular, plural, count, params)

    @classmethod
    def _make(
        cls, template: str, plural: str | None, count: int | None, params: dict[str, Any]
    ) -> Message:
        english = template if plural is None or count == 1 else plural
        if count is not None:
            params = {"count": count, **params}
        message = super().__new__(cls, english.format(**params) if params else english)
        message.template = template
        message.plural = plural
        message.number = count
        message.params = params
        return message

    def translate(self, locale: str) -> str:  # type: ignore[override]
        """This sentence in `locale`; parameters that are messages are translated too."""
        if locale == DEFAULT_LOCALE:
            return str(self)
        translations = catalogue(locale)
        if self.plural is None:
            template = translations.gettext(self.template)
        else:
            template = translations.ngettext(self.template, self.plural, self.number or 0)
        params = {name: translate(value, locale) for name, value in self.params.items()}
        try:
            return template.format(**params) if params else template
        except (KeyError, IndexError, ValueError):  # a broken translation: English is better
            return str(self)


def translate(text: Any, locale: str) -> Any:
    """`text` in `locale` when it is a `Message`; anything else as it is."""
    return text.translate(locale) if isinstance(text, Message) else text


def sentences(*parts: Message) -> Message:
    """`parts` one after another as one text, each rendered in the language asked for: a `str`
    concatenation would keep only the English."""
    return Message(" ".join(f"{{part{index}}}" for index in range(len(parts))),
                   **{f"part{index}": part for index, part in enumerate(parts)})  # fmt: skip


def localized(document: Any, locale: str) -> Any:
    """A JSON-ready document with every `Message` in it rendered in `locale`."""
    if isinstance(document, Message):
        return document.translate(locale)
    if isinstance(document, dict):
        return {key: localized(value, locale) for key, value in document.items()}
    if isinstance(document, list | tuple):
        return [localized(value, locale) for value in document]
    return document


def negotiate(accepted: Iterable[str]) -> str:
    """The first of `accepted` (language tags in order of preference) that we speak, by its
    primary language (`ru-RU` is Russian), else English."""
    for tag in accepted:
        primary = tag.replace("_", "-").split("-")[0].strip().lower()
        if primary in LOCALES:
            return primary
    return DEFAULT_LOCALE


def writes_decimal_comma(locale: str) -> bool:
    """Whether `locale` writes decimals with a comma (`0,5`), as Russian and Estonian do."""
    return locale in DECIMAL_COMMA


@cache
def catalogue(locale: str) -> gettext.NullTranslations:
    """The compiled catalogue of `locale`, or English (the templates themselves) without one."""
    return gettext.translation(DOMAIN, CATALOGUES, languages=[locale], fallback=True)


_ = Message
_n = Message.counted
