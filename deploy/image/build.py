"""``make image``: build podmedic's container image from Debian packages and the locked wheels.

No Docker daemon and no registry: mmdebstrap makes a Debian bookworm root filesystem from the apt
mirror this machine uses, deploy/image/install.sh installs the wheels of deploy/requirements.lock
and podmedic's own into it (offline, in a chroot), and deploy/image/oci.py writes the OCI image
archive. Beside it: a CycloneDX SBOM and image.json with the digest and the figures.

Reproducible: every date is ``SOURCE_DATE_EPOCH``, by default the time of the last commit that
changed what goes in (the product's files, the lock, deploy/image), which is also the
``org.opencontainers.image.revision`` label. So two builds from the same mirror state give the same
digest, and a commit that only pins that digest in the manifests (``--pin``) does not change it. The
mirror moves when Debian publishes updates; then the Debian packages, and the digest, change, and
the SBOM says how.

Usage: python deploy/image/build.py [--out build/image] [--sources FILE|URL] [--install-tools] [--pin]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from oci import ImageConfig, write_archive
from sbom import write_sbom

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "deploy" / "requirements.lock"
# What goes into podmedic's wheel, for `make image` and deploy/Dockerfile alike: the product, not the
# simulator, the benchmarks or the tests.
PROJECT_FILES = ("pyproject.toml", "README.md", "podmedic", "workflows", "activities", "workers")
DEBIAN_PACKAGES = ("python3", "python3-venv", "ca-certificates", "tini")
TOOLS = {"mmdebstrap": "mmdebstrap"}
HOST_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
USER = "10001:10001"
ENTRYPOINT = ["/usr/bin/tini", "--", "/opt/podmedic/bin/podmedic"]
EXPOSED = ["8088/tcp", "8090/tcp", "9464/tcp"]
ENV = ["PATH=/opt/podmedic/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONUNBUFFERED=1",
       "PYTHONDONTWRITEBYTECODE=1"]


class BuildError(RuntimeError):
    """A step failed; the message names the step and what to do."""


def _step(n: int, text: str) -> float:
    print(f"[{n}/5] {text}", flush=True)
    return time.monotonic()


def _run(cmd: list[str], what: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise BuildError(f"{what} failed (exit {done.returncode}): {' '.join(cmd[:3])} ...\n{tail}")
    return done


def ensure_tools(names: dict[str, str], install: bool) -> None:
    """The Debian tools on PATH; with ``install`` (and root), apt-get installs the missing ones."""
    missing = [pkg for tool, pkg in names.items()
               if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists()]
    if not missing:
        return
    if not install or os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise BuildError(f"missing tools: {' '.join(missing)}: install the Debian packages "
                         f"(apt-get install {' '.join(missing)}) or run `make image` as root")
    _run(["apt-get", "update", "-qq"], "apt-get update")
    _run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing], "apt-get install",
         env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


INPUTS = (*PROJECT_FILES, "deploy/image", "deploy/requirements.lock")


def last_change() -> tuple[str, int]:
    """The last commit that changed what goes into the image, and its time; ``-dirty`` if they changed since.

    ``SOURCE_DATE_EPOCH`` in the environment wins for the time.
    """
    commit, when = _run(["git", "-C", str(ROOT), "log", "-1", "--format=%H %ct", "--", *INPUTS],
                        "git log").stdout.split()
    dirty = _run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no", "--", *INPUTS],
                 "git status").stdout.strip()
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH") or when)
    return (f"{commit}-dirty" if dirty else commit), epoch


KUSTOMIZATION = ROOT / "deploy" / "kustomize" / "base" / "kustomization.yaml"
CHART_VALUES = ROOT / "deploy" / "helm" / "podmedic" / "values.yaml"


def _pin_in(path: Path, key: str, digest: str) -> bool:
    """Replace the one line ``key: ...`` of ``path`` by ``key: digest``, keeping its indent; whether it changed."""
    text = path.read_text()
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith(f"{key}:"))
    lines[at] = lines[at].split(f"{key}:")[0] + f"{key}: {digest}"
    new = "\n".join(lines) + "\n"
    path.write_text(new)
    return new != text


def pin(digest: str) -> list[Path]:
    """Write ``digest`` into the base kustomization's image and the chart's values; the files it changed."""
    return [path for path in (KUSTOMIZATION, CHART_VALUES) if _pin_in(path, "digest", digest)]


def build_wheels(wheels: Path, epoch: int) -> int:
    """Every pin of the lock as a wheel, podmedic's own wheel, and the lock, in ``wheels``."""
    wheels.mkdir(parents=True, exist_ok=True)
    for old in wheels.glob("podmedic-*.whl"):
        old.unlink()
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-r", str(LOCK), "-w", str(wheels)],
         "pip wheel (the lock)", env=env)
    stage = wheels.parent / "project"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir()
    for name in PROJECT_FILES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, stage / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, stage / name)
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", str(stage), "-w", str(wheels)],
         "pip wheel (podmedic)", env=env)
    shutil.rmtree(stage)
    shutil.copy2(LOCK, wheels / "requirements.lock")
    return len(list(wheels.glob("*.whl")))


def build_rootfs(out: Path, wheels: Path, sources: str, epoch: int) -> Path:
    """The root filesystem tarball: Debian packages, podmedic's venv, the user; its package list beside it."""
    rootfs, debs = out / "rootfs.tar", out / "debian-packages.tsv"
    install = ROOT / "deploy" / "image" / "install.sh"
    listing = r"${Package}\t${Version}\t${Architecture}\n"
    cmd = ["mmdebstrap", "--mode=root", "--variant=essential", "--quiet", "--format=tar",
           f"--include={','.join(DEBIAN_PACKAGES)}",
           "--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-include=/usr/share/doc/*/copyright",
           "--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/locale/*",
           f"--customize-hook=copy-in {wheels} /tmp", f"--customize-hook=copy-in {install} /tmp",
           f"--customize-hook=chroot \"$1\" dpkg-query -W -f '{listing}' > {debs}",
           "--customize-hook=chroot \"$1\" sh /tmp/install.sh /tmp/wheels",
           "bookworm", str(rootfs), sources]
    _run(cmd, "mmdebstrap", env={**os.environ, "SOURCE_DATE_EPOCH": str(epoch)})
    return rootfs


def main(argv: list[str] | None = None) -> int:
    """Build the image; print each step, then the digest and figures."""
    parser = argparse.ArgumentParser(prog="make image", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "image", help="output directory")
    parser.add_argument("--sources", default=str(HOST_SOURCES) if HOST_SOURCES.exists()
                        else "http://deb.debian.org/debian",
                        help="apt sources (a deb822 file or a mirror URL; default: this machine's)")
    parser.add_argument("--install-tools", action="store_true", help="apt-get install missing tools (root)")
    parser.add_argument("--keep-rootfs", action="store_true", help="keep rootfs.tar (the layer, uncompressed)")
    parser.add_argument("--pin", action="store_true",
                        help="write the digest into deploy/kustomize/base and the Helm chart's values "
                             "(the release procedure, docs/deploy.md)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        t = _step(1, "tools: " + ", ".join(TOOLS))
        ensure_tools(TOOLS, args.install_tools)
        rev, epoch = last_change()
        version = _read_version()
        timings = {"tools_s": time.monotonic() - t}
        t = _step(2, f"wheels of deploy/requirements.lock and podmedic {version}")
        count = build_wheels(args.out / "wheels", epoch)
        timings["wheels_s"] = time.monotonic() - t
        t = _step(3, f"root filesystem: Debian bookworm ({', '.join(DEBIAN_PACKAGES)}) + {count} wheels")
        rootfs = build_rootfs(args.out, args.out / "wheels", args.sources, epoch)
        timings["rootfs_s"] = time.monotonic() - t
        t = _step(4, "OCI image archive")
        labels = {"org.opencontainers.image.title": "podmedic",
                  "org.opencontainers.image.description": "Temporal-driven remediation of Kubernetes pods whose "
                                                          "GPUs fail",
                  "org.opencontainers.image.source": "https://github.com/podmedic/podmedic",
                  "org.opencontainers.image.revision": rev, "org.opencontainers.image.version": version}
        config = ImageConfig(entrypoint=ENTRYPOINT, cmd=["--help"], user=USER, env=ENV, labels=labels,
                             exposed_ports=EXPOSED)
        archive = args.out / f"podmedic-{version}.oci.tar"
        built = write_archive(rootfs, config, f"podmedic:{version}", epoch, archive,
                              name=f"docker.io/library/podmedic:{version}")
        if not args.keep_rootfs:
            rootfs.unlink()
        timings["image_s"] = time.monotonic() - t
        t = _step(5, "SBOM (CycloneDX 1.5)")
        sbom = args.out / f"podmedic-{version}.cdx.json"
        components = write_sbom(sbom, digest=built.digest, version=version, epoch=epoch, lock=LOCK,
                                debs=args.out / "debian-packages.tsv")
        timings["sbom_s"] = time.monotonic() - t
    except BuildError as exc:
        print(f"make image: {exc}", file=sys.stderr)
        return 1
    figures = {"digest": built.digest, "archive": str(archive), "sbom": str(sbom), "version": version,
               "revision": rev, "source_date_epoch": epoch, "layers": built.layers,
               "compressed_mb": round(built.compressed_bytes / 1e6, 1),
               "uncompressed_mb": round(built.uncompressed_bytes / 1e6, 1), "sbom_components": components,
               "build_s": round(time.monotonic() - started, 1), **{k: round(v, 1) for k, v in timings.items()}}
    (args.out / "image.json").write_text(json.dumps(figures, indent=2) + "\n")
    for pinned in pin(built.digest) if args.pin else []:
        print(f"pinned {built.digest} in {pinned.relative_to(ROOT)}")
    print(f"podmedic:{version} {built.digest}")
    print(f"  {archive} ({figures['compressed_mb']} MB compressed, {figures['uncompressed_mb']} MB unpacked, "
          f"{built.layers} layer), SBOM {sbom.name} ({components} components), built in {figures['build_s']} s")
    print(f"  run it:  podman load -i {archive}   push it:  skopeo copy oci-archive:{archive} "
          f"docker://REGISTRY/podmedic:{version}")
    return 0


def _read_version() -> str:
    text = (ROOT / "podmedic" / "__init__.py").read_text()
    return text.split('__version__ = "', 1)[1].split('"', 1)[0]


if __name__ == "__main__":
    sys.exit(main())
