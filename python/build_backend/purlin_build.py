"""The PEP 517 build backend of the purlin package (pyproject.toml names it).

`pip install ./python`, from a checkout of the repository, builds the library
with `make python-lib` (python/python.mk: build/python/libpurlin.so, with the
CUDA kernels when PURLIN_WITH_KERNELS=1 or an nvcc is on PATH) and ships it
inside the package as purlin/lib/libpurlin.so, beside its Go core
libpurlin-core.so, which it loads from there. The wheel is tagged for this
platform (py3-none-<platform>): it holds a native library, but no Python
extension, so one wheel serves every Python 3. The backend needs nothing
beyond the standard library (tomllib; tomli before Python 3.11), so pip's
isolated build environment installs nothing.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import sysconfig
import zipfile
from typing import Dict, List, Optional, Tuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - listed in build-system.requires for these versions
    import tomli as tomllib

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # python/
ROOT = os.path.dirname(PACKAGE_DIR)  # the repository
LIBRARY = os.path.join(ROOT, "build", "python", "libpurlin.so")


def _project() -> dict:
    with open(os.path.join(PACKAGE_DIR, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _dist_name(project: dict) -> str:
    return f"{project['name'].replace('-', '_')}-{project['version']}"


def _tag() -> str:
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"py3-none-{platform}"


def _metadata(project: dict) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project.get('description', '')}",
    ]
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    if "license" in project:
        lines.append(f"License: {project['license'].get('text', '')}")
    for req in project.get("dependencies", []):
        lines.append(f"Requires-Dist: {req}")
    for extra, reqs in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        for req in reqs:
            marker = f'extra == "{extra}"'
            lines.append(f"Requires-Dist: {req}; {marker}" if ";" not in req
                         else f"Requires-Dist: {req} and {marker}")
    readme = project.get("readme")
    if readme:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(PACKAGE_DIR, readme), encoding="utf-8") as f:
            return "\n".join(lines) + "\n\n" + f.read()
    return "\n".join(lines) + "\n"


def _build_library() -> str:
    """Runs `make python-lib` at the repository root; returns the library's path."""
    if not (os.path.exists(os.path.join(ROOT, "go.mod")) and os.path.isdir(os.path.join(ROOT, "capi"))):
        raise RuntimeError(
            f"purlin: {PACKAGE_DIR} is not inside a checkout of the Purlin repository; the package "
            "is built from one (pip install ./python there), since it builds libpurlin.so from the Go sources")
    make = os.environ.get("MAKE", "make")
    # The build's output goes to stderr: pip shows it when the build fails (or with -v).
    done = subprocess.run([make, "-C", ROOT, "--no-print-directory", "python-lib"], stdout=sys.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"purlin: `make python-lib` failed in {ROOT} (exit {done.returncode}); "
                           "it needs Go with cgo and a C compiler")
    return LIBRARY


def _record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def _write_wheel(wheel_directory: str, files: List[Tuple[str, bytes]]) -> str:
    """Writes the wheel of files (archive name, contents) plus the .dist-info; returns its name."""
    project = _project()
    dist = _dist_name(project)
    tag = _tag()
    info = f"{dist}.dist-info"
    wheel_meta = f"Wheel-Version: 1.0\nGenerator: purlin_build\nRoot-Is-Purelib: false\nTag: {tag}\n"
    files = files + [(f"{info}/METADATA", _metadata(project).encode()),
                     (f"{info}/WHEEL", wheel_meta.encode())]
    name = f"{dist}-{tag}.whl"
    record = [_record_line(arcname, data) for arcname, data in files] + [f"{info}/RECORD,,"]
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as whl:
        for arcname, data in files:
            entry = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
            entry.external_attr = (0o755 if arcname.endswith(".so") else 0o644) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(entry, data)
        whl.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return name


def _package_files() -> List[Tuple[str, bytes]]:
    """purlin/*.py and py.typed, as archive names and contents."""
    files = []
    pkg = os.path.join(PACKAGE_DIR, "purlin")
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py") or name == "py.typed":
            with open(os.path.join(pkg, name), "rb") as f:
                files.append((f"purlin/{name}", f.read()))
    return files


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def get_requires_for_build_wheel(config_settings: Optional[Dict] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[Dict] = None) -> List[str]:
    return []


def _libraries(library: str) -> List[Tuple[str, str]]:
    """The files the package ships: libpurlin.so and the Go core it loads from beside itself."""
    return [("libpurlin.so", library), ("libpurlin-core.so", os.path.join(os.path.dirname(library), "libpurlin-core.so"))]


def build_wheel(wheel_directory: str, config_settings: Optional[Dict] = None,
                metadata_directory: Optional[str] = None) -> str:
    library = _build_library()
    return _write_wheel(wheel_directory, _package_files() + [(f"purlin/lib/{name}", _read(path)) for name, path in _libraries(library)])


def build_editable(wheel_directory: str, config_settings: Optional[Dict] = None,
                   metadata_directory: Optional[str] = None) -> str:
    """`pip install -e ./python`: the library is copied into python/purlin/lib/
    (git-ignored) and a .pth file puts python/ on sys.path."""
    library = _build_library()
    for name, path in _libraries(library):
        target = os.path.join(PACKAGE_DIR, "purlin", "lib", name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target + ".tmp", "wb") as f:
            f.write(_read(path))
        os.replace(target + ".tmp", target)
    return _write_wheel(wheel_directory, [("purlin_editable.pth", (PACKAGE_DIR + "\n").encode())])


def build_sdist(sdist_directory: str, config_settings: Optional[Dict] = None) -> str:
    raise RuntimeError("purlin has no sdist: the package builds libpurlin.so from the repository's Go "
                       "sources; install from a checkout (pip install ./python) or a built wheel")
