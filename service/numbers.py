"""Numbers as JSON spells them that a double cannot hold: how a request's body keeps them.

The JSON reader of `service.api.request` makes one of these of `NaN`, `Infinity` or `1e400`; the
core refuses it by the name of what it was sent for, saying why.
"""

from __future__ import annotations

from service.i18n import _


class NonFiniteNumber:
    """A number JSON can spell but a float cannot hold: `NaN`, `Infinity` or one like `1e400`.

    Parsing keeps it as this marker instead of failing, so that it is refused by the name of the
    field (or binding) it was sent for: the core checks every binding and names its value by
    `repr`, which says why such a number is refused.
    """

    __slots__ = ("text",)
    _SPELLED = ("NaN", "Infinity", "-Infinity")

    def __init__(self, text: str) -> None:
        self.text = text

    @property
    def overflows(self) -> bool:
        """Whether this is a number written with digits (`1e400`, or 400 digits), finite but too
        large for a double, rather than `NaN` or `Infinity`."""
        return self.text not in self._SPELLED

    def __repr__(self) -> str:
        if not self.overflows:
            return self.text
        # a sentence to translate: the problem that names this value is rendered in the
        # request's language
        number = self.text if len(self.text) <= 24 else self.text[:16] + "…"
        return _("{number}, which overflows a 64-bit float", number=number)
