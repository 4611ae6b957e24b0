"""An --app module whose import raises: drain must show this file, line and message."""

from __future__ import annotations

SETTINGS = {"mailer": "smtp://mail.example.com"}
raise RuntimeError("MAILER_URL is not set")  # the user's own mistake, line 6
