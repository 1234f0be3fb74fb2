"""Sentences a learner reads: marked for translation where they are written, rendered per request.

A `Message` is the English sentence itself (a `str`, so the core and its tests read it as text)
that also remembers its template and parameters. The HTTP layer renders it again in the language
the client asked for, from the gettext catalogues under `service/translations/`.

Mark a sentence with `_("division by zero: {divisor} is 0", divisor=text)`: one whole sentence per
template, parameters by name, so a translator can reorder them. `pybabel extract` finds every `_`.
"""

from __future__ import annotations

import gettext
from functools import cache
from pathlib import Path
from typing import Any

LOCALES = ("en", "ru", "et")  # English is the source language and the fallback
DEFAULT_LOCALE = "en"
DOMAIN = "messages"
CATALOGUES = Path(__file__).parent / "translations"


class Message(str):
    """An English sentence that can be rendered again in another language."""

    template: str
    params: dict[str, Any]

    def __new__(cls, template: str, /, **params: Any) -> Message:
        message = super().__new__(cls, template.format(**params) if params else template)
        message.template = template
        message.params = params
        return message

    def translate(self, locale: str) -> str:
        """This sentence in `locale`; parameters that are messages are translated too."""
        if locale == DEFAULT_LOCALE:
            return str(self)
        template = catalogue(locale).gettext(self.template)
        params = {name: translate(value, locale) for name, value in self.params.items()}
        return template.format(**params) if params else template


def translate(text: Any, locale: str) -> Any:
    """`text` in `locale` when it is a `Message`; anything else as it is."""
    return text.translate(locale) if isinstance(text, Message) else text


@cache
def catalogue(locale: str) -> gettext.NullTranslations:
    """The compiled catalogue of `locale`, or English (the templates themselves) without one."""
    return gettext.translation(DOMAIN, CATALOGUES, languages=[locale], fallback=True)


_ = Message
