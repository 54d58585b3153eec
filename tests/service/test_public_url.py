"""`serve --public-url`: the one origin the owner's proxy serves, accepted exactly besides
loopback by the Host and Origin checks; anything but https (loopback aside) refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopx_chat.errors import UsageError
from loopx_chat.service.public_url import parse_public_url
from loopx_chat.service.security import host_refusal, origin_refusal

PORT = 8767


@pytest.mark.parametrize(
    ("text", "origin"),
    [
        ("https://mac.tail1234.ts.net", "https://mac.tail1234.ts.net"),
        ("https://Mac.Tail1234.ts.net/", "https://mac.tail1234.ts.net"),
        ("https://loopx.home.example:8443", "https://loopx.home.example:8443"),
        ("https://loopx.home.example:443", "https://loopx.home.example"),
        ("https://[fd7a:115c::1]:8443", "https://[fd7a:115c::1]:8443"),
        ("http://127.0.0.1:9000", "http://127.0.0.1:9000"),
    ],
)
def test_an_https_origin_is_taken(text: str, origin: str) -> None:
    assert parse_public_url(text).origin == origin


@pytest.mark.parametrize(
    "text",
    [
        "http://mac.tail1234.ts.net",  # not https, not loopback
        "http://192.168.1.5:8767",
        "ftp://mac.example",
        "https://",
        "mac.tail1234.ts.net",
        "https://mac.example/loopx",  # a path
        "https://mac.example/?a=1",
        "https://mac.example/#x",
        "https://user:pw@mac.example",
        "https://mac.example:99999",
    ],
)
def test_anything_else_is_public_url_invalid(text: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_public_url(text)
    assert caught.value.error_code == "public_url_invalid"


def test_the_host_check_accepts_exactly_the_public_origin_besides_loopback() -> None:
    public = parse_public_url("https://phone-test.example:8443")
    assert host_refusal("phone-test.example:8443", PORT, public) is None
    assert host_refusal(f"127.0.0.1:{PORT}", PORT, public) is None
    for wrong in (
        "phone-test.example",  # the default port is not this origin's
        "phone-test.example:8767",
        "phone-test.example:443",
        "evil.phone-test.example:8443",
        "phone-test.example.evil:8443",
        "other.example:8443",
    ):
        assert host_refusal(wrong, PORT, public) is not None, wrong
    # Without a public URL, the public host is refused like any other.
    assert host_refusal("phone-test.example:8443", PORT) is not None


def test_the_default_port_may_be_named_or_left_out() -> None:
    public = parse_public_url("https://mac.tail1234.ts.net")
    assert host_refusal("mac.tail1234.ts.net", PORT, public) is None
    assert host_refusal("mac.tail1234.ts.net:443", PORT, public) is None
    assert host_refusal("mac.tail1234.ts.net:80", PORT, public) is not None


def test_the_origin_check_accepts_exactly_the_public_origin() -> None:
    public = parse_public_url("https://phone-test.example:8443")
    assert origin_refusal("https://phone-test.example:8443", PORT, public) is None
    assert origin_refusal(f"http://127.0.0.1:{PORT}", PORT, public) is None
    for wrong in (
        "http://phone-test.example:8443",  # same host and port, not https
        "https://phone-test.example",
        "https://phone-test.example:8444",
        "https://evil.example",
        "null",
    ):
        assert origin_refusal(wrong, PORT, public) is not None, wrong
    assert origin_refusal("https://phone-test.example:8443", PORT) is not None


def test_serve_refuses_a_plain_http_public_url_before_it_listens(tmp_path: Path) -> None:
    import subprocess
    import sys

    state = tmp_path / "state"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "loopx_chat", "--state-dir", str(state), "serve"),
            *("--port", "0", "--public-url", "http://phone.example:8443"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "public_url_invalid" in done.stderr and "Traceback" not in done.stderr
    assert not (state / "service.json").exists()
