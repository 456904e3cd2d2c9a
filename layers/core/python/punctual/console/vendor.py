"""The console's third-party browser libraries: which npm files it ships, and how they get there.

The libraries are pinned (exact versions) in the repository's ``package.json``; building the
assets copies their prebuilt browser files and licences from ``node_modules`` into
``static/vendor/`` with a manifest (``vendor.json``: package, version, sha256). The copies are
committed and shipped in the wheel, so serving the console needs no Node; only refreshing them
does::

    npm ci && python -m punctual.console.vendor      # (make console-assets)

A test checks the committed copies against ``node_modules`` and ``package.json``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

VENDOR_DIR = Path(__file__).parent / "static" / "vendor"
MANIFEST = VENDOR_DIR / "vendor.json"


@dataclass(frozen=True)
class VendorFile:
    package: str  # npm package that provides it
    source: str  # path inside node_modules/<package>
    target: str  # file name under static/vendor


FILES: tuple[VendorFile, ...] = (
    VendorFile("echarts", "dist/echarts.min.js", "echarts.min.js"),
    VendorFile("echarts", "LICENSE", "LICENSE-echarts.txt"),
    VendorFile("echarts", "NOTICE", "NOTICE-echarts.txt"),
    VendorFile("echarts", "licenses/LICENSE-d3", "LICENSE-echarts-d3.txt"),
    # zrender (echarts' renderer) and tslib are bundled inside echarts.min.js
    VendorFile("zrender", "LICENSE", "LICENSE-zrender.txt"),
    VendorFile("tslib", "LICENSE.txt", "LICENSE-tslib.txt"),
    VendorFile("cronstrue", "dist/cronstrue.min.js", "cronstrue.min.js"),
    VendorFile("cronstrue", "LICENSE", "LICENSE-cronstrue.txt"),
)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build(node_modules: Path, target: Path = VENDOR_DIR) -> dict[str, dict[str, str]]:
    """Copy :data:`FILES` from ``node_modules`` into ``target`` and write the manifest; return it."""
    target.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, dict[str, str]] = {}
    for entry in FILES:
        package_dir = node_modules / entry.package
        version = json.loads((package_dir / "package.json").read_text())["version"]
        shutil.copyfile(package_dir / entry.source, target / entry.target)
        manifest[entry.target] = {"package": entry.package, "version": version, "sha256": sha256(target / entry.target)}
    (target / MANIFEST.name).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    node_modules = Path(args[0] if args else "node_modules")
    if not node_modules.is_dir():
        print(f"{node_modules} not found: run npm ci first", file=sys.stderr)
        return 1
    for name, entry in sorted(build(node_modules).items()):
        print(f"{name}: {entry['package']} {entry['version']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
