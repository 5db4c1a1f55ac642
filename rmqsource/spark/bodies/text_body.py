"""``bodyFormat=text``: the body as UTF-8 text in one column, ``bodyText``."""

from __future__ import annotations

from .errors import BadBody


class TextBody:
    def decode(self, data: bytes) -> list:
        try:
            return [data.decode("utf-8")]
        except UnicodeDecodeError as exc:
            raise BadBody(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
