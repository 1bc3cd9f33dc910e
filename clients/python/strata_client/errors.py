# SPDX-License-Identifier: MIT
"""One exception type for every failure: :class:`StrataError` carries the §0 error body."""
from __future__ import annotations

from typing import Optional

from .types import ErrorBody


class StrataError(Exception):
    """An answer that is not 2xx (or no answer at all: :class:`StrataNetworkError`).

    ``status`` is the HTTP status, ``code`` the error code (e.g. ``"not_found"``), ``message``
    the server's text and ``body`` the whole ``error`` object, with the extra fields some errors
    carry (``seats`` of a 409 seats_unavailable, ``booking`` of a 409 conflict). Tell errors
    apart by ``code``: e.g. ``e.code == "last_owner"`` (409) when a room's last owner would
    leave or be demoted.
    """

    status: int
    code: str
    message: str
    body: ErrorBody
    retry_after: Optional[float]
    """seconds, from Retry-After"""

    def __init__(self, status: int, body: ErrorBody, retry_after: Optional[float] = None) -> None:
        super().__init__(f"{status} {body['code']}: {body['message']}")
        self.status = status
        self.code = body["code"]
        self.message = body["message"]
        self.body = body
        self.retry_after = retry_after


class StrataNetworkError(StrataError):
    """The server could not be reached, after every retry (status 0, code ``unreachable``)."""

    def __init__(self, message: str, cause: Optional[BaseException] = None) -> None:
        super().__init__(0, {"code": "unreachable", "message": message})
        self.__cause__ = cause
