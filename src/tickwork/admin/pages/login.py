"""The login page."""

from __future__ import annotations

from tickwork.admin.html import Html, el
from tickwork.admin.pages.layout import document


def login(error: str | None, next_path: str, login_token: str) -> Html:
    return document(
        "Log in",
        el(
            "main",
            el("h1", "tickwork admin"),
            el("p", error, class_="error", role="alert") if error else None,
            el(
                "form",
                el("input", type="hidden", name="login_token", value=login_token),
                el("input", type="hidden", name="next", value=next_path),
                el(
                    "label",
                    "Name ",
                    el(
                        "input",
                        type="text",
                        name="username",
                        autocomplete="username",
                        required=True,
                    ),
                ),
                el(
                    "label",
                    "Secret ",
                    el(
                        "input",
                        type="password",
                        name="password",
                        autocomplete="current-password",
                        required=True,
                    ),
                ),
                el("button", "Log in", type="submit"),
                method="post",
                action="/login",
                class_="login",
            ),
            class_="narrow",
        ),
    )
