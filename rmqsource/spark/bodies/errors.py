"""The one exception a body decoder raises: the body is a bad record, and why (docs/bodies.md)."""


class BadBody(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
