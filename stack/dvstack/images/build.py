"""The operator's and the Spark job's container images, built without a Docker engine.

`python -m dvstack.images build` (as root) builds `Dockerfile` and
`spark_templates/Dockerfile` with buildah and writes each image to an OCI archive in
the cache, ready for `ctr -n k8s.io images import --base-name REPOSITORY ARCHIVE`.
`python -m dvstack.images verify` runs both images' smoke checks.

The Dockerfiles name the official images as their default bases (build arguments
PYTHON_IMAGE, MAVEN_IMAGE, SPARK_IMAGE); with no registry to pull them from, this
builder makes stand-ins of its own, `localhost/dv-python`, `localhost/dv-maven` and
`localhost/dv-spark`, from a Debian minbase root filesystem (debootstrap, the suite and
mirror apt is configured with) plus PyPI's pyspark for Spark. Their recipes are in
`stack/images/` (`<base>.Containerfile`, `spark-entrypoint.sh`, `spark-decom.sh`).

Everything is cached by content: a base is tagged with a hash of its recipe (package list,
Containerfile, the files it copies, build arguments), a project image with a hash of its
Dockerfile, the ids of its base images and the files its COPY instructions read (those git
sees: tracked or untracked-but-not-ignored, with their working-tree contents). The build
context is exactly those files, staged apart from the checkout, so the image holds what was
hashed. An unchanged tree finds its archives and builds nothing.

Buildah keeps its storage under the stack's cache directory (`images/`), as do the
archives, build logs, the Maven repository the Spark image's `jars` stage uses (mounted on
/root/.m2, so a rebuild downloads nothing already fetched) and a pip cache for the bases.
The build steps reach PyPI and Maven Central through the host's network and trust the
host's CA store (/etc/ssl/certs, mounted read-only while they run, not copied into the
images). No mount is left behind: whatever a build leaves mounted under the cache is
unmounted when it ends. `BUILDAH_ISOLATION=chroot` is honoured by buildah where runc
cannot run; `DV_BUILDAH_STORAGE_DRIVER` overrides the storage driver (overlay when the
kernel has it and the cache is not itself on overlayfs, else vfs); `DV_DEBIAN_MIRROR`
overrides the mirror read from apt's sources.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dvstack.settings import SPARK_VERSION, Settings, load

SUITE = "bookworm"
VARIANT = "minbase"
RECIPES = Path(__file__).resolve().parents[2] / "images"
APT_SOURCES = (Path("/etc/apt/sources.list.d"), Path("/etc/apt/sources.list"))
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
HOST_CERTS = Path("/etc/ssl/certs")
KEY_LENGTH = 12
BASE_REVISION = 1
"""Part of every base's key: raise it when the way this module makes a root filesystem
(debootstrap's options, `_trim_rootfs`) changes, so the bases are made again."""
KEEP = 3
"""Images (and archives) kept per repository: the newest, by creation time. Checkouts
share the cache, so a few keys stay, not only this checkout's."""
STEP_TIMEOUT_SECONDS = 3600.0


@dataclass(frozen=True)
class _Recipe:
    """An image of the stack's own: `localhost/dv-<name>`, from stack/images/."""

    name: str

    @property
    def repository(self) -> str:
        return f"localhost/dv-{self.name}"

    @property
    def containerfile(self) -> Path:
        return RECIPES / f"{self.name}.Containerfile"


@dataclass(frozen=True)
class Base(_Recipe):
    """A base image made here: debootstrap of `packages`, then `<name>.Containerfile`."""

    packages: tuple[str, ...]
    extra_files: tuple[str, ...] = ()
    """Files of stack/images/ the Containerfile copies."""
    build_args: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Project:
    """An image of the project: its Dockerfile, built on bases passed as build arguments."""

    name: str
    dockerfile: str
    """Relative to the repository root, which is also the build context."""
    bases: tuple[tuple[str, str], ...]
    """(build argument, base name)."""

    @property
    def repository(self) -> str:
        return f"localhost/derived-views-{self.name}"


@dataclass(frozen=True)
class Component(_Recipe):
    """An image of something the stack runs on its node that is not the project's (the
    Spark Operator): `stack/images/<name>.Containerfile` on bases, its context files given
    by the caller from the cache, not the checkout."""

    bases: tuple[tuple[str, str], ...]


_PYTHON = ("python3", "python3-venv", "python3-distutils", "passwd", "ca-certificates",
           "netbase", "tzdata")
BASES: dict[str, Base] = {b.name: b for b in (
    Base("python", _PYTHON),
    Base("maven", ("maven", "openjdk-17-jdk-headless", "ca-certificates")),
    Base("spark", (*_PYTHON, "openjdk-17-jre-headless", "tini", "procps"),
         extra_files=("spark-entrypoint.sh", "spark-decom.sh"),
         build_args=(("SPARK_VERSION", SPARK_VERSION),)),
)}
PROJECTS: dict[str, Project] = {p.name: p for p in (
    Project("operator", "Dockerfile", (("PYTHON_IMAGE", "python"),)),
    Project("spark", "spark_templates/Dockerfile",
            (("MAVEN_IMAGE", "maven"), ("SPARK_IMAGE", "spark"))),
)}

IMAGE_COMPONENTS: dict[str, Component] = {c.name: c for c in (
    Component("spark-operator", (("SPARK_IMAGE", "spark"),)),
)}

# ---------------------------------------------------------------- pure logic


def debian_mirror(sources: str, suite: str = SUITE) -> tuple[str, str | None] | None:
    """(URI, Signed-By keyring or None) of the first `deb` source of `suite` in an apt
    sources file, deb822 (`*.sources`) or one-line (`sources.list`); None when absent."""
    stanza: dict[str, str] = {}
    stanzas = [stanza]
    for raw in sources.splitlines():
        if raw.lstrip().startswith("#"):
            continue
        line = raw.rstrip()
        if not line.strip():
            stanza = {}
            stanzas.append(stanza)
            continue
        if line.startswith("deb ") or line.startswith("deb\t"):
            found = _one_line_source(line, suite)
            if found is not None:
                return found
            continue
        if ":" in line and not line[0].isspace():
            field, value = line.split(":", 1)
            stanza[field.strip().lower()] = value.strip()
    for fields in stanzas:
        if ("deb" in fields.get("types", "").split() and suite in fields.get("suites", "").split()
                and fields.get("uris")):
            keyring = fields.get("signed-by") or None
            if keyring is not None and not keyring.startswith("/"):
                keyring = None  # an inline key block: debootstrap needs a file
            return fields["uris"].split()[0], keyring
    return None


def _one_line_source(line: str, suite: str) -> tuple[str, str | None] | None:
    words = line.split()[1:]
    keyring: str | None = None
    if words and words[0].startswith("["):
        options: list[str] = []
        while words:
            word = words.pop(0)
            options.append(word.strip("[]"))
            if word.endswith("]"):
                break
        for option in options:
            if option.startswith("signed-by="):
                keyring = option.split("=", 1)[1]
    if len(words) >= 2 and words[1] == suite:
        return words[0], keyring
    return None


def copied_sources(dockerfile: str) -> list[str]:
    """The build-context paths a Dockerfile's COPY and ADD instructions read (not those
    copying from a stage or image, `--from=`, nor ADD's URLs)."""
    joined = dockerfile.replace("\\\r\n", " ").replace("\\\n", " ")
    sources: list[str] = []
    for raw in joined.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, rest = line.partition(" ")
        if instruction.upper() not in ("COPY", "ADD"):
            continue
        rest = rest.strip()
        words = [w for w in rest.split() if w.startswith("--")]
        if any(w.startswith("--from=") for w in words):
            continue
        if rest.lstrip().startswith("["):
            args = [str(a) for a in json.loads(rest[rest.index("["):])]
        else:
            args = [w for w in rest.split() if not w.startswith("--")]
        for source in args[:-1]:
            if "://" not in source and source not in sources:
                sources.append(source)
    return sources


def content_key(dockerfile: str, bases: Mapping[str, str],
                files: Iterable[tuple[str, bool, str]]) -> str:
    """A project image's cache key: its Dockerfile's text, the image id passed as each base
    build argument, and each context file as (path, executable, sha256 of its content)."""
    digest = hashlib.sha256()
    digest.update(b"dockerfile\0" + dockerfile.encode() + b"\0")
    for arg in sorted(bases):
        digest.update(f"base\0{arg}\0{bases[arg]}\0".encode())
    for path, executable, sha in sorted(files):
        digest.update(f"file\0{path}\0{'x' if executable else '-'}\0{sha}\0".encode())
    return digest.hexdigest()[:KEY_LENGTH]


def base_key(base: Base, containerfile: str, extras: Mapping[str, bytes],
             suite: str = SUITE) -> str:
    """A base image's cache key: what debootstrap installs and what the recipe does
    (the mirror is not part of it: any mirror of the suite serves the same packages)."""
    digest = hashlib.sha256()
    digest.update(f"{BASE_REVISION}\0{suite}\0{VARIANT}\0".encode())
    digest.update(f"{','.join(sorted(base.packages))}\0".encode())
    for arg, value in sorted(base.build_args):
        digest.update(f"arg\0{arg}\0{value}\0".encode())
    digest.update(b"containerfile\0" + containerfile.encode() + b"\0")
    for name in sorted(extras):
        digest.update(f"extra\0{name}\0".encode() + hashlib.sha256(extras[name]).digest())
    return digest.hexdigest()[:KEY_LENGTH]


def _unescape_mount_path(field: str) -> str:
    """/proc/mounts writes space, tab, newline and backslash in octal (\\040...)."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1:i + 4].isdigit() and len(field[i + 1:i + 4]) == 3:
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mounts_under(mounts: str, roots: Sequence[Path]) -> list[str]:
    """Mount points (from /proc/mounts text) at or below any of `roots`."""
    found = []
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        point = _unescape_mount_path(fields[1])
        for root in roots:
            if point == str(root) or point.startswith(str(root).rstrip("/") + "/"):
                found.append(point)
                break
    return found


def storage_driver(filesystems: str, mounts: str, path: Path) -> str:
    """overlay when the kernel has it and `path` is not on an overlayfs (an overlay's upper
    directory cannot be another overlay's layer), else vfs (copies, but needs nothing)."""
    if not any(line.split()[-1:] == ["overlay"] for line in filesystems.splitlines()):
        return "vfs"
    best, fstype = "", ""
    target = str(path)
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = _unescape_mount_path(fields[1])
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, fstype = point, fields[2]
    return "vfs" if fstype == "overlay" else "overlay"


# ---------------------------------------------------------------- the machine


@dataclass(frozen=True)
class Layout:
    """Where the builder keeps things, under the stack's cache directory."""

    top: Path
    driver: str

    @property
    def storage(self) -> Path:
        return self.top / f"storage-{self.driver}"

    @property
    def runroot(self) -> Path:
        return self.top / "run"

    @property
    def work(self) -> Path:
        return self.top / "work"

    @property
    def archives(self) -> Path:
        return self.top / "archives"

    @property
    def logs(self) -> Path:
        return self.top / "logs"

    @property
    def maven_repository(self) -> Path:
        return self.top / "m2"

    @property
    def pip_cache(self) -> Path:
        return self.top / "pip"


def image_layout(settings: Settings) -> Layout:
    top = settings.cache_dir / "images"
    driver = os.environ.get("DV_BUILDAH_STORAGE_DRIVER") or storage_driver(
        _read("/proc/filesystems"), _read("/proc/mounts"), settings.cache_dir)
    return Layout(top, driver)


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _need(command: str, package: str) -> None:
    if not shutil.which(command):
        raise SystemExit(f"'{command}' was not found on PATH: install the Debian package "
                         f"{package} (the image builder needs it)")


def _preflight() -> None:
    if os.geteuid() != 0:
        raise SystemExit("dvstack.images.build must run as root: buildah builds rootful here and "
                         "debootstrap needs root (e.g. sudo .venv/bin/python -m dvstack.images "
                         "build)")
    _need("buildah", "buildah")
    _need("tar", "tar")


def host_mirror() -> tuple[str, str | None]:
    """The Debian mirror (and keyring) apt is configured with for SUITE, read now."""
    given = os.environ.get("DV_DEBIAN_MIRROR")
    if given:
        return given, None
    directory, single = APT_SOURCES
    files = sorted(directory.glob("*.sources")) + sorted(directory.glob("*.list")) + [single]
    for path in files:
        if path.is_file():
            found = debian_mirror(path.read_text(), SUITE)
            if found is not None:
                return found
    return DEFAULT_MIRROR, None


class Buildah:
    """The buildah command line on the builder's own storage, logging to a file."""

    def __init__(self, where: Layout) -> None:
        self.where = where

    def argv(self, *args: str) -> list[str]:
        return ["buildah", "--root", str(self.where.storage), "--runroot",
                str(self.where.runroot), "--storage-driver", self.where.driver, *args]

    def output(self, *args: str) -> str | None:
        """stdout of a quick query, None when it fails (e.g. no such image)."""
        done = subprocess.run(self.argv(*args), capture_output=True, text=True, timeout=120)
        return done.stdout.strip() if done.returncode == 0 else None

    def image_id(self, ref: str) -> str | None:
        return self.output("inspect", "--type", "image", "--format", "{{.FromImageID}}", ref)

    def logged(self, log: Path, what: str, *args: str) -> None:
        _logged(log, what, self.argv(*args))


def _logged(log: Path, what: str, argv: Sequence[str]) -> None:
    """Run a long step with its output appended to `log`; fail with the log's tail."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(argv)}\n")
        out.flush()
        try:
            done = subprocess.run(list(argv), stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, timeout=STEP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            raise SystemExit(f"{what}: no end after {STEP_TIMEOUT_SECONDS:.0f}s (log: {log})"
                             ) from None
    if done.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise SystemExit(f"{what} failed (exit {done.returncode}); the end of {log}:\n{tail}")


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextlib.contextmanager
def _exclusive(where: Layout) -> Iterator[None]:
    """One build at a time per cache (checkouts share it)."""
    where.top.mkdir(parents=True, exist_ok=True)
    with (where.top / "lock").open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _say("waiting for another image build on this cache to finish...")
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _unmount_under(path: Path) -> None:
    """Unmount everything mounted at or below `path`, deepest first; refuse to go on
    when something stays (removing the tree would reach into the mounted filesystem)."""
    for point in sorted(set(mounts_under(_read("/proc/mounts"), [path])), key=len, reverse=True):
        if subprocess.run(["umount", point], capture_output=True).returncode != 0:
            subprocess.run(["umount", "--lazy", point], capture_output=True)
    left = mounts_under(_read("/proc/mounts"), [path])
    if left:
        raise SystemExit(f"{left[0]} is still mounted: unmount it before the image builder "
                         f"removes {path}")


def _remove_tree(path: Path) -> None:
    if path.exists():
        _unmount_under(path)
        shutil.rmtree(path)


@contextlib.contextmanager
def released_mounts(roots: Sequence[Path]) -> Iterator[None]:
    """Unmount, at the end, whatever got mounted under `roots` meanwhile (buildah's overlay
    layers, debootstrap's /proc and /sys of a target it did not finish)."""
    before = set(mounts_under(_read("/proc/mounts"), roots))
    try:
        yield
    finally:
        left = [m for m in mounts_under(_read("/proc/mounts"), roots) if m not in before]
        for point in sorted(set(left), key=len, reverse=True):
            if subprocess.run(["umount", point], capture_output=True).returncode != 0:
                subprocess.run(["umount", "--lazy", point], capture_output=True)
        if left:
            _say(f"unmounted {len(set(left))} mount(s) a build left under the image cache")


# ---------------------------------------------------------------- bases


def _base_tag(base: Base) -> str:
    extras = {name: (RECIPES / name).read_bytes() for name in base.extra_files}
    return f"{base.repository}:{base_key(base, base.containerfile.read_text(), extras)}"


def _trim_rootfs(rootfs: Path) -> None:
    """What an image should not carry: device nodes (the runtime provides /dev), apt's
    downloaded packages and lists, and the build machine's name and resolver."""
    for pattern in ("dev/*", "var/cache/apt/archives/*.deb", "var/lib/apt/lists/*",
                    "var/log/bootstrap.log", "tmp/*", "etc/hostname"):
        for path in rootfs.glob(pattern):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
    resolv = rootfs / "etc" / "resolv.conf"
    if resolv.exists() or resolv.is_symlink():
        resolv.unlink()
        resolv.write_text("")


def _volumes(*pairs: tuple[Path, str]) -> list[str]:
    """-v arguments: the host's CA store (read-only) when it has one, then `pairs`."""
    args = []
    if HOST_CERTS.is_dir():
        args += ["-v", f"{HOST_CERTS}:{HOST_CERTS}:ro"]
    for host, container in pairs:
        host.mkdir(parents=True, exist_ok=True)
        args += ["-v", f"{host}:{container}"]
    return args


def ensure_base(buildah: Buildah, base: Base) -> tuple[str, str]:
    """(tag, image id) of the base, built first when this recipe has no image yet."""
    tag = _base_tag(base)
    found = buildah.image_id(tag)
    if found:
        return tag, found
    _need("debootstrap", "debootstrap")
    where = buildah.where
    mirror, keyring = host_mirror()
    if keyring is None and not DEBIAN_KEYRING.is_file():
        raise SystemExit(f"{DEBIAN_KEYRING} is missing: install the Debian package "
                         "debian-archive-keyring (debootstrap checks the suite's signature)")
    key = tag.rsplit(":", 1)[1]
    work = where.work / f"base-{base.name}-{key}"
    log = where.logs / f"base-{base.name}.log"
    log.unlink(missing_ok=True)
    _remove_tree(work)
    rootfs, context = work / "rootfs", work / "context"
    context.mkdir(parents=True)
    began = time.monotonic()
    _say(f"building base {tag}: debootstrap {SUITE} ({len(base.packages)} packages) from "
         f"{mirror}, then buildah (first run only: minutes; log {log})")
    try:
        debootstrap = ["debootstrap", f"--variant={VARIANT}", "--components=main",
                       f"--include={','.join(base.packages)}"]
        if keyring:
            debootstrap.append(f"--keyring={keyring}")
        _logged(log, f"debootstrap of {base.repository}",
                [*debootstrap, SUITE, str(rootfs), mirror])
        _unmount_under(rootfs)
        _trim_rootfs(rootfs)
        _logged(log, f"packing {base.repository}'s root filesystem",
                ["tar", "--create", "--file", str(context / "rootfs.tar"), "--numeric-owner",
                 "--xattrs", "--xattrs-include=*", "--directory", str(rootfs), "."])
        _remove_tree(rootfs)
        for name in base.extra_files:
            shutil.copy2(RECIPES / name, context / name)
        build_args = [a for arg, value in base.build_args for a in ("--build-arg",
                                                                     f"{arg}={value}")]
        buildah.logged(log, f"buildah bud of {base.repository}",
                       "bud", "--network", "host", "--force-rm", "--layers=false",
                       *_volumes((where.pip_cache, "/root/.cache/pip")), *build_args,
                       "-f", str(base.containerfile), "-t", tag, str(context))
    finally:
        _remove_tree(work)
    _say(f"  {tag} built in {time.monotonic() - began:.0f}s")
    image = buildah.image_id(tag)
    if not image:
        raise SystemExit(f"buildah bud finished but {tag} is not in the store (log: {log})")
    _prune(buildah, base.repository, keep=tag)
    return tag, image


# ---------------------------------------------------------------- project images


def context_files(repo: Path, sources: Sequence[str]) -> list[str]:
    """The files under `sources` (paths relative to the repository root) that go into the
    build context: those git sees (tracked, or untracked and not ignored) and that exist;
    every file below them when the checkout is not a git work tree."""
    if not sources:
        return []
    done = subprocess.run(
        ["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard",
         "--", *sources], capture_output=True, timeout=60) if shutil.which("git") else None
    if done is not None and done.returncode == 0:
        names = {n for n in done.stdout.decode().split("\0") if n}
    else:
        names = set()
        for source in sources:
            for path in repo.glob(source.rstrip("/")):
                found = path.rglob("*") if path.is_dir() else [path]
                names |= {str(p.relative_to(repo)) for p in found
                          if p.is_file() and "__pycache__" not in p.parts}
    return sorted(n for n in names if (repo / n).is_file())


def _file_entry(path: Path, name: str) -> tuple[str, bool, str]:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return name, os.access(path, os.X_OK), digest.hexdigest()


def _stage_context(files: Mapping[str, Path], dockerfile_name: str, dockerfile: str,
                   into: Path) -> None:
    """The build context: exactly the hashed files, with the modes git would give them."""
    for name, source in files.items():
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        target.chmod(0o755 if os.access(source, os.X_OK) else 0o644)
    (into / dockerfile_name).parent.mkdir(parents=True, exist_ok=True)
    (into / dockerfile_name).write_text(dockerfile)


def build_project(buildah: Buildah, repo: Path, project: Project,
                  bases: Mapping[str, tuple[str, str]]) -> tuple[str, Path]:
    """(tag, OCI archive) of the project image, built when its key has no archive yet."""
    dockerfile = (repo / project.dockerfile).read_text()
    names = context_files(repo, copied_sources(dockerfile))
    return _build(buildah, project.name, project.repository, project.dockerfile, dockerfile,
                  {name: repo / name for name in names}, project.bases, bases,
                  mounts=((buildah.where.maven_repository, "/root/.m2"),))


def build_component(buildah: Buildah, component: Component, files: Mapping[str, Path],
                    bases: Mapping[str, tuple[str, str]]) -> tuple[str, Path]:
    """(tag, OCI archive) of a component's image: its Containerfile with `files` (context
    name -> file) as the context, built when its key has no archive yet."""
    missing = sorted(set(copied_sources(component.containerfile.read_text())) - set(files))
    if missing:
        raise ValueError(f"{component.containerfile.name} copies {missing}, not given")
    name = component.containerfile.name
    return _build(buildah, component.name, component.repository, name,
                  component.containerfile.read_text(), files, component.bases, bases,
                  mounts=())


def _build(buildah: Buildah, name: str, repository: str, dockerfile_name: str,
           dockerfile: str, files: Mapping[str, Path], base_args: Sequence[tuple[str, str]],
           bases: Mapping[str, tuple[str, str]], *,
           mounts: Sequence[tuple[Path, str]]) -> tuple[str, Path]:
    """Build `dockerfile` on `files` (the context, exactly: name -> file) and archive it,
    keyed by content; the archive alone when the key has one already."""
    where = buildah.where
    entries = [_file_entry(path, context_name) for context_name, path in files.items()]
    key = content_key(dockerfile, {arg: bases[base][1] for arg, base in base_args}, entries)
    tag = f"{repository}:{key}"
    archive = where.archives / f"{repository.rsplit('/', 1)[1]}-{key}.oci.tar"
    if archive.is_file():
        return tag, archive
    log = where.logs / f"{name}.log"
    log.unlink(missing_ok=True)
    context = where.work / f"context-{name}-{key}"
    shutil.rmtree(context, ignore_errors=True)
    context.mkdir(parents=True)
    began = time.monotonic()
    _say(f"building {tag} ({len(files)} context files; log {log})")
    try:
        _stage_context(files, dockerfile_name, dockerfile, context)
        build_args = [a for arg, base in base_args
                      for a in ("--build-arg", f"{arg}={bases[base][0]}")]
        buildah.logged(log, f"buildah bud of {dockerfile_name}",
                       "bud", "--pull-never", "--network", "host", "--force-rm",
                       "--layers=false", *_volumes(*mounts),
                       *build_args, "-f", str(context / dockerfile_name), "-t", tag,
                       str(context))
    finally:
        shutil.rmtree(context, ignore_errors=True)
    built = time.monotonic()
    where.archives.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(archive.name + ".partial")
    partial.unlink(missing_ok=True)
    buildah.logged(log, f"buildah push of {tag}", "push", tag,
                   f"oci-archive:{partial}:{tag}")
    partial.replace(archive)
    _say(f"  {tag} built in {built - began:.0f}s, archived in {time.monotonic() - built:.0f}s")
    _prune(buildah, repository, keep=tag)
    return tag, archive


def _prune(buildah: Buildah, repository: str, keep: str) -> None:
    """Keep the KEEP newest images of `repository` (always `keep`) and their archives;
    drop images no tag names any more."""
    listing = buildah.output("images", "--json")
    entries = json.loads(listing) if listing else []
    tagged = sorted(((int(e.get("created") or 0), name) for e in entries
                     for name in e.get("names") or [] if name.rsplit(":", 1)[0] == repository),
                    reverse=True)
    kept = {keep} | {name for _, name in tagged[:KEEP]}
    for _, name in tagged:
        if name not in kept:
            buildah.output("rmi", name)
    stem = repository.rsplit("/", 1)[1] + "-"
    keys = {name.rsplit(":", 1)[1] for name in kept}
    for archive in buildah.where.archives.glob(f"{stem}*.oci.tar"):
        key = archive.name[len(stem):-len(".oci.tar")]
        if len(key) == KEY_LENGTH and key not in keys:
            archive.unlink()
    buildah.output("rmi", "--prune")


def build_images(settings: Settings, names: Sequence[str] | None = None
                 ) -> dict[str, tuple[str, Path]]:
    """{"operator": (tag, archive), "spark": (tag, archive)}: the project's images, built
    (with the bases they need) unless the cache already holds them."""
    wanted = [PROJECTS[n] for n in (names or list(PROJECTS))]
    _preflight()
    where = image_layout(settings)
    buildah = Buildah(where)
    for directory in (where.storage, where.runroot, where.archives, where.logs):
        directory.mkdir(parents=True, exist_ok=True)
    results: dict[str, tuple[str, Path]] = {}
    with _exclusive(where), released_mounts([where.top]):
        _remove_tree(where.work)  # what an interrupted build left
        needed = sorted({base for p in wanted for _, base in p.bases})
        bases = {name: ensure_base(buildah, BASES[name]) for name in needed}
        for project in wanted:
            results[project.name] = build_project(buildah, settings.repo, project, bases)
    return results


def component_image(settings: Settings, name: str, files: Mapping[str, Path]
                    ) -> tuple[str, Path]:
    """(tag, archive) of the component `name`'s image on `files`, built (with its bases)
    unless the cache already holds it."""
    component = IMAGE_COMPONENTS[name]
    _preflight()
    where = image_layout(settings)
    buildah = Buildah(where)
    for directory in (where.storage, where.runroot, where.archives, where.logs):
        directory.mkdir(parents=True, exist_ok=True)
    with _exclusive(where), released_mounts([where.top]):
        bases = {base: ensure_base(buildah, BASES[base]) for _, base in component.bases}
        return build_component(buildah, component, files, bases)

# ---------------------------------------------------------------- smoke checks

CONNECTOR_JARS = (
    "spark-sql-kafka-0-10_2.13", "spark-token-provider-kafka-0-10_2.13", "kafka-clients",
    "commons-pool2", "hadoop-aws", "s3", "s3-transfer-manager", "apache-client",
    "netty-nio-client", "spark-avro_2.13", "spark-hadoop-cloud_2.13")
"""What stack/jars/spark-kafka, spark-s3 and spark-avro put into the Spark image (prefixes)."""
SMOKE_JOB = """\
# A driver as Spark's Kubernetes backend starts one, in local mode: the JVM, Python and
# py4j work together, and the connectors' classes link against the image's jars.
import opensearchpy, psycopg, pydantic  # the job's own dependencies
from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("dv-image-smoke").getOrCreate()
jvm = spark.sparkContext._jvm
for name in ("org.apache.spark.sql.kafka010.KafkaSourceProvider",
             "org.apache.hadoop.fs.s3a.S3AFileSystem",
             "org.apache.spark.sql.avro.AvroDataToCatalyst",
             "org.apache.spark.internal.io.cloud.AbortableStreamBasedCheckpointFileManager"):
    jvm.java.lang.Class.forName(name)
print("smoke job: counted", spark.range(5).count(), "rows; connector classes load")
spark.stop()
"""
SMOKE_CHECKS: dict[str, tuple[tuple[str, ...], ...]] = {
    "operator": (
        ("derived-views-operator", "--help"),
        ("python", "-c", "import derived_views, kopf, psycopg, pydantic; print('imports ok')"),
    ),
    "spark": (
        ("sh", "-c", "id; echo SPARK_HOME=$SPARK_HOME JAVA_HOME=$JAVA_HOME; pwd; "
         "test -x /opt/entrypoint.sh && test -x /opt/decom.sh"),
        ("/opt/entrypoint.sh", "driver", "--version"),
        ("python3", "-c", "import pyspark, psycopg, pydantic, opensearchpy; "
         "print('pyspark', pyspark.__version__)"),
        ("python3", "-c", "import importlib.util, sys; sys.exit('grpc is installed: PySpark "
         "imports it into every driver (spark_templates/Dockerfile)' if importlib.util."
         "find_spec('grpc') else 0)"),
        ("sh", "-c", "cd /opt/spark/jars && for jar in " + " ".join(
            f"'{j}-[0-9]*.jar'" for j in CONNECTOR_JARS) + "; do ls $jar || exit 1; done"),
        ("env", "SPARK_DRIVER_BIND_ADDRESS=127.0.0.1", "/opt/entrypoint.sh", "driver",
         "--master", "local[1]", "--conf", "spark.ui.enabled=false", "/smoke/smoke_job.py"),
    ),
}
"""Run in a working container of each image, as its user, without network; the hostname
is `localhost` (a pod's own name resolves through the /etc/hosts the kubelet writes)."""


def verify(settings: Settings, built: Mapping[str, tuple[str, Path]]) -> bool:
    """Run each image's smoke checks; True when all pass. Prints each check's output."""
    where = image_layout(settings)
    buildah = Buildah(where)
    ok = True
    with _exclusive(where), released_mounts([where.top]):
        smoke = where.work / "smoke"
        smoke.mkdir(parents=True, exist_ok=True)
        (smoke / "smoke_job.py").write_text(SMOKE_JOB)
        try:
            for name, (tag, _archive) in built.items():
                ok = _verify_image(buildah, name, tag, smoke) and ok
        finally:
            _remove_tree(smoke)
    return ok


def _verify_image(buildah: Buildah, name: str, tag: str, smoke: Path) -> bool:
    container = buildah.output("from", "--pull-never", tag)
    if not container:
        raise SystemExit(f"{tag} is not in the image store: run `build` first")
    ok = True
    try:
        for check in SMOKE_CHECKS.get(name, ()):
            began = time.monotonic()
            done = subprocess.run(
                buildah.argv("run", "--network", "none", "--hostname", "localhost",
                             "-v", f"{smoke}:/smoke:ro", container, "--", *check),
                capture_output=True, text=True, timeout=600)
            passed = done.returncode == 0
            ok = ok and passed
            print(f"[{'ok' if passed else 'FAILED'}] {name} ({time.monotonic() - began:.1f}s): "
                  f"{' '.join(check)}")
            out, err = done.stdout.strip().splitlines(), done.stderr.strip().splitlines()
            for line in (out or err)[-8:] if passed else (out + err)[-40:]:
                print(f"    {line}")
    finally:
        buildah.output("rm", container)
    return ok


def run_builder(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dvstack.images", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("build", "verify"))
    parser.add_argument("images", nargs="*", metavar="IMAGE",
                        help=f"{', '.join(PROJECTS)} (default: all)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.images if n not in PROJECTS]
    if unknown:
        parser.error(f"unknown image(s) {', '.join(unknown)}: choose from {', '.join(PROJECTS)}")
    settings = load()
    began = time.monotonic()
    built = build_images(settings, args.images or None)
    _say(f"images ready in {time.monotonic() - began:.1f}s")
    for name, (tag, archive) in built.items():
        print(f"{name}\t{tag}\t{archive}")
    if args.command == "verify" and not verify(settings, built):
        raise SystemExit("a smoke check failed")


if __name__ == "__main__":
    run_builder()
