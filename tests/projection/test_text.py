"""One test per rule of `session_runtime/_text.py`: how a fact value becomes display text,
and which texts a compact projection withholds as a secret or a local path.

The examples are written here from the credential formats their issuers document (GitHub
token prefixes, AWS access key ids, Google API keys, Slack tokens, Stripe keys, JWTs, PEM
blocks) and from the path shapes of macOS, Linux and Windows, never from the module's
patterns; each has a near miss that must stay visible, so a pattern that grows too wide
fails as surely as one that is dropped.
"""

from __future__ import annotations

import enum

import pytest

from loopx_chat.session_runtime._text import (
    collapse,
    public_safe_list,
    public_safe_text,
    scalar_str,
    text,
    truncate,
    unsafe_text_class,
)

# (example, near miss that is not one)
SECRETS: dict[str, tuple[str, str]] = {
    "openai key": ("key sk-" + "a1B2" * 5, "sk-short1234"),
    "github classic token": ("ghp_" + "A1b2C3d4E5" * 4, "ghp_tooShort123"),
    "github oauth token": ("gho_" + "Z9y8X7w6V5" * 3, "gho_" + "Z9y8" * 4),
    "github user-to-server": ("ghu_" + "abcdefghij" * 2, "ghu_abc"),
    "github server-to-server": ("ghs_" + "0123456789" * 2, "ghs_0123"),
    "github refresh token": ("ghr_" + "q" * 20, "ghr_" + "q" * 19),
    "github fine-grained": ("github_pat_" + "11ABCDEFG0" * 3, "github_pat_short"),
    "slack bot token": ("xoxb-" + "1234567890-abc", "xoxb-12345"),
    "slack user token": ("xoxp-" + "9" * 12, "xoxz-" + "9" * 12),
    "aws access key id": ("AKIA" + "IOSFODNN7EXAMPLE", "AKIA" + "IOSFODNN7EXAMPL"),
    "google api key": ("AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6", "AIza" + "Sy" * 5),
    "bearer header": ("Bearer abcdefghijkl.mn", "bearer short"),
    "pem private key": ("-----BEGIN RSA PRIVATE KEY-----", "-----BEGIN CERTIFICATE-----"),
    "pem plain private key": ("-----BEGIN PRIVATE KEY-----", "-----BEGIN PUBLIC KEY-----"),
    "jwt": (
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig",
        "eyJhbGci.short",
    ),
    "password assignment": ("password=hunter2", "password policy"),
    "client secret": ("client_secret: abc", "secretary"),
    "api key assignment": ("API-KEY = xyz", "api key rotation"),
    "access token": ("access_token=abc", "access"),
    "authorization header": ("Authorization: Basic", "authorized"),
    "basic credentials": ("basic dXNlcjpwYXNz", "basic usage"),
    "stripe live key": ("sk_live_" + "4eC39HqL", "sk_live_4e"),
    "stripe test restricted key": ("rk_test_" + "abcdefgh", "rk_prod_abcdefgh"),
    "url with credentials": ("https://bob:hunter2@example.com/x", "https://example.com/@bob"),
}

LOCAL_PATHS: dict[str, tuple[str, str]] = {
    "macOS home": ("/Users/ada/project", "/usr/share/doc"),
    "linux home": ("opened /home/ada/x", "/homework/ada"),
    "root home": ("/root/.codex/auth.json", "/rooted/x"),
    "macOS private": ("/private/tmp/x", "/privately/x"),
    "macOS per-user temp": ("/var/folders/zz/x", "/var/foldersx/y"),
    "log folder": ("/var/log/syslog", "/var/lib/x"),
    "tmp": ("at /tmp/session", "attmp/x"),
    "mounted volume": ("/Volumes/Disk/x", "/volumes/disk"),
    "mnt": ("(/mnt/data/x)", "/mntx/data"),
    "opt": ("=/opt/app/bin", "/optical/x"),
    "etc": ("'/etc/passwd'", "etc/passwd"),
    "srv": ("[/srv/www/", "/srvx/"),
    "workspace": (",/workspace/repo/", "/workspaces/repo"),
    "tilde": ("~/notes.txt", "~notes"),
    "tilde backslash": ("open ~\\notes", "a~b"),
    "windows drive": ("C:\\Users\\ada", "C:/Users"),
    "unc share": ("\\\\server\\share", "\\server"),
    "file url": ("file:///Users/ada", "profile://x"),
}


SHAPES = [("secret", name, *pair) for name, pair in SECRETS.items()] + [
    ("local_path", name, *pair) for name, pair in LOCAL_PATHS.items()
]


@pytest.mark.parametrize(
    ("kind", "name", "example", "near_miss"), SHAPES, ids=[f"{k}:{n}" for k, n, *_ in SHAPES]
)
def test_each_shape_is_withheld_and_its_near_miss_is_not(
    kind: str, name: str, example: str, near_miss: str
) -> None:
    assert unsafe_text_class(example) == kind, example
    assert public_safe_text(example, 500) is None
    assert unsafe_text_class(near_miss) is None, near_miss
    assert public_safe_text(near_miss, 500) == near_miss


def test_a_text_with_both_is_classed_a_secret() -> None:
    assert unsafe_text_class("/Users/ada token=abc") == "secret"


class _Str(str):
    def __str__(self) -> str:
        return "overridden"


class _Int(int):
    def __str__(self) -> str:
        return "overridden"


class _Float(float):
    def __str__(self) -> str:
        return "overridden"


class _Level(enum.IntEnum):
    HIGH = 3


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain", "plain"),
        (_Str("chars"), "chars"),  # the characters, not what __str__ says
        (True, "True"),
        (False, "False"),
        (0, "0"),
        (-12, "-12"),
        (1.5, "1.5"),
        (_Int(7), "7"),
        (_Float(2.5), "2.5"),
        (_Level.HIGH, "3"),  # an int subclass shows its number, not its name
        (None, None),
        ({"a": 1}, None),
        (["a"], None),
        (b"bytes", None),
    ],
)
def test_scalar_str_takes_json_scalars_only(value: object, expected: str | None) -> None:
    shown = scalar_str(value)
    assert shown == expected
    # Always a plain str: a subclass carried along could still change how it prints later.
    assert shown is None or type(shown) is str


def test_an_int_beyond_the_digit_limit_has_no_text() -> None:
    import sys

    huge = 10 ** (sys.get_int_max_str_digits() + 1)
    assert scalar_str(huge) is None
    assert scalar_str(_Int(huge)) is None
    assert text(huge) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("  a \n\t b  ", "a b"),
        ("   ", None),
        ("", None),
        (True, "True"),
        (_Str("  x  y "), "x y"),
        ([1], None),
        (None, None),
    ],
)
def test_collapse_and_text_join_whitespace_and_drop_empty(
    value: object, expected: str | None
) -> None:
    assert collapse(value) == expected
    assert text(value) == expected


def test_truncate_keeps_limit_minus_one_then_the_ellipsis() -> None:
    assert truncate("abcdef", 6) == "abcdef"
    assert truncate("abcdefg", 6) == "abcde..."
    assert truncate("abcd efg", 6) == "abcd..."  # right-stripped before the ellipsis


def test_text_caps_at_180_by_default() -> None:
    assert text("x" * 180) == "x" * 180
    assert text("x" * 181) == "x" * 179 + "..."
    assert text(_Str("y" * 181)) == "y" * 179 + "..."
    assert text("z" * 11, limit=10) == "z" * 9 + "..."


def test_public_safe_text_checks_before_it_truncates() -> None:
    key = "AKIA" + "IOSFODNN7EXAMPLE"
    assert public_safe_text("x" * 30 + " " + key, 10) is None  # the cap cannot hide the key
    assert public_safe_text("  long   text here ", 8) == "long te..."
    assert public_safe_text(None, 10) is None


def test_public_safe_list_keeps_safe_entries_up_to_the_limit() -> None:
    values = ["a", "/Users/ada/x", "", "b", 3, {"no": 1}, "c"]
    assert public_safe_list(values, item_limit=20, max_items=10) == ["a", "b", "3", "c"]
    assert public_safe_list(tuple(values), item_limit=20, max_items=2) == ["a", "b"]
    assert public_safe_list("a string", item_limit=20, max_items=5) == []
    assert public_safe_list(None, item_limit=20, max_items=5) == []
    assert public_safe_list({"a": 1}, item_limit=20, max_items=5) == []
