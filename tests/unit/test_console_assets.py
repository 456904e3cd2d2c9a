"""The console's static page: served under /console with its security headers, vendored libraries
matching the pinned npm packages, no inline script or style, and nothing in the page that writes HTML."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from punctual.console import vendor, web

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
STATIC = web.STATIC_DIR


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(Starlette(routes=web.routes()))


@pytest.mark.parametrize("path", ["/console/", "/console/jobs/job_1", "/console/runs/run_x_1", "/console/ops"])
def test_every_console_path_answers_the_page_with_a_strict_csp(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
    assert response.headers["referrer-policy"] == "no-referrer"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["cache-control"] == "no-store"


def test_assets_are_served_with_the_same_headers_and_nothing_outside_static(client: TestClient) -> None:
    script = client.get("/console/assets/js/app.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert script.headers["content-security-policy"] == web.CSP
    assert client.get("/console/assets/vendor/echarts.min.js").status_code == 200
    for escape in ("/console/assets/../web.py", "/console/assets/%2e%2e/web.py", "/console/assets/..%2fweb.py"):
        response = client.get(escape)
        assert "STATIC_DIR" not in response.text, escape  # never a file outside static/
    assert client.get("/console", follow_redirects=False).headers["location"] == "/console/"


def test_the_page_has_no_inline_script_style_or_handler() -> None:
    html = (STATIC / "index.html").read_text()
    for tag in re.findall(r"<script[^>]*>(.*?)</script>", html, re.S):
        assert tag.strip() == "", "inline script"
    assert "<style" not in html and " style=" not in html
    assert not re.search(r"\son[a-z]+=", html), "inline event handler"
    for src in re.findall(r'(?:src|href)="([^"]+)"', html):
        assert src.startswith(("/console/", "data:")), f"{src}: only this origin"


def test_the_app_never_writes_html() -> None:
    for script in (STATIC / "js").rglob("*.js"):
        text = script.read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
            assert sink not in text, f"{script.name} uses {sink}"


def test_vendored_files_match_the_manifest_and_the_pinned_packages() -> None:
    manifest = json.loads(vendor.MANIFEST.read_text())
    assert set(manifest) == {f.target for f in vendor.FILES}
    pinned = json.loads((ROOT / "package.json").read_text())["devDependencies"]
    for name, entry in manifest.items():
        assert vendor.sha256(vendor.VENDOR_DIR / name) == entry["sha256"], f"{name} differs from vendor.json"
        if entry["package"] in pinned:
            assert pinned[entry["package"]] == entry["version"], f"{name}: package.json pins another version"
    node_modules = ROOT / "node_modules"
    if not (node_modules / "echarts").is_dir():
        pytest.skip("node_modules not installed (make test installs it)")
    for entry in vendor.FILES:
        built = node_modules / entry.package / entry.source
        assert vendor.sha256(built) == manifest[entry.target]["sha256"], f"{entry.target}: run make console-assets"


def test_every_vendored_library_ships_its_licence() -> None:
    packages = {f.package for f in vendor.FILES}
    licences = {f.package for f in vendor.FILES if f.target.startswith("LICENSE")}
    assert packages == licences


def test_the_wheel_ships_every_static_file() -> None:
    # setuptools package-data globs (pyproject.toml) must cover every file of static/, or a
    # `pip install` would serve a console without its scripts (checked by building a wheel once).
    import fnmatch
    import tomllib

    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["punctual"]
    package = STATIC.parent.parent
    for path in STATIC.rglob("*"):
        if path.is_file():
            relative = path.relative_to(package).as_posix()
            assert any(fnmatch.fnmatch(relative, g) and relative.count("/") == g.count("/") for g in globs), (
                f"{relative} is not in package-data"
            )
