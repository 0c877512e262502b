"""Debian packages as data: downloaded by name, unpacked, never installed.

`apt-get download NAME` fetches the candidate version's .deb into a cache folder (no root
needed, no install); `dpkg -x` unpacks it beside. A package named twice is read from the
cache. The version is part of the folder's name, so a new release is a new folder and the
corpus built on it a new fingerprint.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from nmt.errors import UsageError


class MissingPackage(UsageError):
    """A named package apt cannot give: the message names the command that would."""


@dataclass(frozen=True)
class Unpacked:
    """A package's files unpacked under `root` (root/usr/share/...), at `version`."""

    name: str
    version: str
    root: Path


def candidate_versions(names: list[str]) -> dict[str, str]:
    """{name: the version `apt-get download` would fetch}, from apt's package lists, read by
    one `apt-cache show` for all the names (each call reads the lists anew: ~0.7 s)."""
    if not names:
        return {}
    if shutil.which("apt-cache") is None:
        raise MissingPackage(f"{names[0]}: apt-cache not found; Debian's package sources need apt")
    shown = subprocess.run(
        ["apt-cache", "show", "--no-all-versions", *names], capture_output=True, text=True
    )
    versions, package = {}, None
    for line in shown.stdout.splitlines():
        if line.startswith("Package: "):
            package = line.removeprefix("Package: ").strip()
        elif line.startswith("Version: ") and package is not None:
            versions.setdefault(package, line.removeprefix("Version: ").strip())
    for name in names:
        if name not in versions:
            raise MissingPackage(
                f"Debian package {name} is unknown to apt: run `apt-get update` "
                f"(then `apt-get download {name}` must work)"
            )
    return versions


def candidate_version(name: str) -> str:
    """The version `apt-get download NAME` would fetch."""
    return candidate_versions([name])[name]


def unpacked_all(names: list[str], cache: Path) -> dict[str, Unpacked]:
    """{name: its files at its candidate version}, each downloaded and unpacked once."""
    versions = candidate_versions(names)
    return {name: unpacked(name, cache, versions[name]) for name in names}


def unpacked(name: str, cache: Path, version: str | None = None) -> Unpacked:
    """The package's files at `version` (its candidate version if None), downloaded and
    unpacked once."""
    version = version or candidate_version(name)
    root = cache / f"{name}_{version.replace(':', '%3a')}"
    if (root / ".unpacked").exists():
        return Unpacked(name, version, root)
    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    got = subprocess.run(
        ["apt-get", "download", f"{name}={version}"], cwd=debs, capture_output=True, text=True
    )
    deb = next(debs.glob(f"{name}_{version.replace(':', '%3a')}_*.deb"), None)
    if got.returncode != 0 or deb is None:
        why = (got.stderr.strip().splitlines() or ["no .deb written"])[-1]
        raise MissingPackage(f"`apt-get download {name}` failed ({why}): run `apt-get update`")
    if root.exists():
        shutil.rmtree(root)
    subprocess.run(["dpkg", "-x", str(deb), str(root)], check=True)
    deb.unlink()
    (root / ".unpacked").touch()
    return Unpacked(name, version, root)
