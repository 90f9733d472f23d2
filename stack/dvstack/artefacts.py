"""Build or fetch the stack's expensive artefacts once, into the cache.

Binaries come from the Go module proxy (built by `stack/build-kube.sh`), jars
from Maven Central (`stack/jars/*/pom.xml`).  A `.complete` marker is written
only after a fetch succeeds, so an interrupted run is retried, not trusted; for
jars it holds the pom's digest, so a changed pom fetches again.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dvstack.settings import (
    APICURIO_VERSION,
    DEBEZIUM_VERSION,
    HADOOP_VERSION,
    KAFKA_VERSION,
    KUBE_VERSION,
    OPENSEARCH_VERSION,
    S3PROXY_VERSION,
    SPARK_VERSION,
    Settings,
)


@dataclass(frozen=True)
class KubeBinaries:
    etcd: Path
    apiserver: Path
    controller_manager: Path


def _need(tool: str, package_hint: str) -> str:
    found = shutil.which(tool)
    if not found:
        raise SystemExit(f"'{tool}' was not found on PATH: install {package_hint}")
    return found


def kube_binaries(settings: Settings) -> KubeBinaries:
    """Honour KUBEBUILDER_ASSETS / TEST_ASSET_* like envtest, else build once."""
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    given = {
        "etcd": os.environ.get("TEST_ASSET_ETCD") or (assets and f"{assets}/etcd"),
        "kube-apiserver": os.environ.get("TEST_ASSET_KUBE_APISERVER")
        or (assets and f"{assets}/kube-apiserver"),
        "kube-controller-manager": os.environ.get("TEST_ASSET_KUBE_CONTROLLER_MANAGER")
        or (assets and f"{assets}/kube-controller-manager"),
    }
    built = settings.cache_dir / f"kube-{KUBE_VERSION}" / "bin"
    resolved: dict[str, Path] = {}
    for name, path in given.items():
        if path and Path(path).is_file():
            resolved[name] = Path(path)
    if len(resolved) < 3:
        missing = [n for n in given if n not in resolved and not (built / n).is_file()]
        if missing:
            _need("go", "Go >= 1.24 (or set KUBEBUILDER_ASSETS to envtest binaries)")
            print(f"building {', '.join(missing)} {KUBE_VERSION} from the Go module proxy "
                  "(first run only; takes a while)...", flush=True)
            subprocess.run(
                ["bash", str(settings.repo / "stack" / "build-kube.sh")],
                env={**os.environ, "DV_CACHE_DIR": str(settings.cache_dir),
                     "KUBE_VERSION": KUBE_VERSION},
                check=True,
            )
        for name in given:
            resolved.setdefault(name, built / name)
    return KubeBinaries(
        etcd=resolved["etcd"],
        apiserver=resolved["kube-apiserver"],
        controller_manager=resolved["kube-controller-manager"],
    )


def pom_digest(pom_dir: Path) -> str:
    """What a jar directory's `.complete` marker holds: the digest of the pom it came from."""
    return hashlib.sha256((pom_dir / "pom.xml").read_bytes()).hexdigest()


def _maven_copy(settings: Settings, pom_dir: Path, goal: str, out: Path) -> Path:
    """Copy a pom's jars into `out` once per pom: the marker holds the pom's digest, so a
    cache filled from an older pom (a jar added since) is filled again."""
    marker = out / ".complete"
    digest = pom_digest(pom_dir)
    if marker.is_file() and marker.read_text().strip() == digest:
        return out
    _need("mvn", "Maven (Debian package: maven)")
    print(f"fetching jars into {out} from Maven Central (once per pom)...", flush=True)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    proc = subprocess.run(
        ["mvn", "-q", "-B", "-f", str(pom_dir / "pom.xml"), goal, f"-DoutputDirectory={out}",
         "-DincludeScope=runtime"],
        capture_output=True, text=True, check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"mvn {goal} in {pom_dir.name} failed:\n{proc.stdout[-4000:]}{proc.stderr[-2000:]}")
    marker.write_text(f"{digest}\n")
    return out


def kafka_libs(settings: Settings) -> Path:
    return _maven_copy(
        settings,
        settings.repo / "stack" / "jars" / "kafka-broker",
        "dependency:copy-dependencies",
        settings.cache_dir / f"kafka-{KAFKA_VERSION}" / "libs",
    )


def kafka_connect_libs(settings: Settings) -> Path:
    """Kafka Connect's worker jars and the Debezium PostgreSQL connector's plugin archive."""
    return _maven_copy(
        settings,
        settings.repo / "stack" / "jars" / "kafka-connect",
        "dependency:copy-dependencies",
        settings.cache_dir / f"kafka-connect-{KAFKA_VERSION}-debezium-{DEBEZIUM_VERSION}" / "libs",
    )


APICURIO_CONVERTER_PLUGIN = "apicurio-registry-converter"
"""The converter's plugin directory, inside the `plugin.path` root
`apicurio_converter_plugins` returns."""


def apicurio_converter_plugins(settings: Settings) -> Path:
    """A `plugin.path` root holding one plugin, Apicurio's Kafka Connect converter and its
    jars (APICURIO_CONVERTER_PLUGIN/*.jar), fetched once. A root of its own, not a directory
    beside Debezium's: jars directly in a root would each be a plugin, and the cached
    Debezium tree is complete already. Every jar is an artifactItem of the POM (`copy`): the
    3.0.9 artifacts' parent POM is not on Maven Central (stack/jars/apicurio-converter)."""
    root = settings.cache_dir / f"kafka-connect-apicurio-converter-{APICURIO_VERSION}"
    _maven_copy(
        settings,
        settings.repo / "stack" / "jars" / "apicurio-converter",
        "dependency:copy",
        root / APICURIO_CONVERTER_PLUGIN,
    )
    return root


def spark_kafka_jars(settings: Settings) -> list[Path]:
    out = _maven_copy(
        settings,
        settings.repo / "stack" / "jars" / "spark-kafka",
        "dependency:copy",
        settings.cache_dir / f"spark-{SPARK_VERSION}-kafka-jars",
    )
    return sorted(out.glob("*.jar"))


def spark_avro_jars(settings: Settings) -> list[Path]:
    """spark-avro (`from_avro`), for views whose records are Avro."""
    out = _maven_copy(
        settings,
        settings.repo / "stack" / "jars" / "spark-avro",
        "dependency:copy",
        settings.cache_dir / f"spark-{SPARK_VERSION}-avro-jars",
    )
    return sorted(out.glob("*.jar"))


def spark_s3_jars(settings: Settings) -> list[Path]:
    """hadoop-aws (PySpark's Hadoop) and the AWS SDK modules S3A needs, for s3a:// paths."""
    out = _maven_copy(
        settings,
        settings.repo / "stack" / "jars" / "spark-s3",
        "dependency:copy-dependencies",
        settings.cache_dir / f"spark-{SPARK_VERSION}-hadoop-{HADOOP_VERSION}-s3-jars",
    )
    return sorted(out.glob("*.jar"))


def s3proxy_jar(settings: Settings) -> Path:
    """S3Proxy's self-contained jar (`java -jar`)."""
    out = _maven_copy(
        settings,
        settings.repo / "stack" / "jars" / "s3proxy",
        "dependency:copy",
        settings.cache_dir / f"s3proxy-{S3PROXY_VERSION}",
    )
    jars = sorted(out.glob("s3proxy-*-jar-with-dependencies.jar"))
    if not jars:
        raise SystemExit(f"no S3Proxy jar in {out}: delete that directory and run again")
    return jars[0]


def opensearch_home(settings: Settings) -> Path:
    """OpenSearch's minimal distribution (the server, no plugins, no JDK), unpacked once."""
    home = settings.cache_dir / f"opensearch-{OPENSEARCH_VERSION}"
    marker = home / ".complete"
    if marker.is_file():
        return home
    zips = _maven_copy(
        settings,
        settings.repo / "stack" / "jars" / "opensearch",
        "dependency:copy",
        settings.cache_dir / f"opensearch-{OPENSEARCH_VERSION}-zip",
    )
    archive = _fetched(zips, f"opensearch-{OPENSEARCH_VERSION}.zip")

    def unzip(into: Path) -> None:
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(into)
    return _unpacked_once(home, unzip, inner=home.name)


def apicurio_registry_home(settings: Settings) -> Path:
    """Apicurio Registry's built application (the Quarkus runner jar and `lib/`), unpacked
    once; the schema registry runs it with `java -jar` (dvstack.services.schema_registry)."""
    home = settings.cache_dir / f"apicurio-registry-{APICURIO_VERSION}"
    marker = home / ".complete"
    if marker.is_file():
        return home
    archives = _maven_copy(
        settings,
        settings.repo / "stack" / "jars" / "apicurio-registry",
        "dependency:copy",
        settings.cache_dir / f"apicurio-registry-{APICURIO_VERSION}-archive",
    )
    archive = _fetched(archives, f"apicurio-registry-app-{APICURIO_VERSION}-all.tar.gz")

    def untar(into: Path) -> None:  # the archive has no top directory
        with tarfile.open(archive) as tf:
            tf.extractall(into, filter="data")
    return _unpacked_once(home, untar, inner=None)


def _fetched(directory: Path, name: str) -> Path:
    archive = directory / name
    if not archive.is_file():
        raise SystemExit(f"no {name} in {directory}: delete that directory and run again")
    return archive


def _unpacked_once(home: Path, extract: Callable[[Path], None], inner: str | None) -> Path:
    """Unpacked beside its final place (`inner`: the archive's top directory) and renamed,
    so a half-unpacked tree is never used; marked complete last."""
    partial = home.parent / f"{home.name}.partial"
    for stale in (partial, home):
        if stale.exists():
            shutil.rmtree(stale)
    extract(partial)
    if inner is None:
        partial.rename(home)
    else:
        (partial / inner).rename(home)
        partial.rmdir()
    (home / ".complete").write_text("ok\n")
    return home


def postgres_bindir() -> Path:
    """Debian installs server binaries outside PATH, per major version."""
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), reverse=True)
    if candidates:
        return candidates[0].parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).resolve().parent
    raise SystemExit("PostgreSQL server binaries (initdb, pg_ctl) not found: "
                     "install the Debian package 'postgresql'")


def java() -> str:
    return _need("java", "a Java 17+ runtime (Debian package: openjdk-17-jre-headless)")
