"""A one-layer OCI image archive, written without any image tool or registry.

The node's pod sandbox image is one static binary; containerd imports an OCI
image-layout tarball (`ctr images import`), so the stack writes that tarball
itself: a layer, its config, a manifest and an index naming the image.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from dataclasses import dataclass


@dataclass(frozen=True)
class File:
    path: str
    data: bytes
    mode: int = 0o755


def _tar(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _layer(files: list[File]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for f in sorted(files, key=lambda f: f.path):
            info = tarfile.TarInfo(f.path.lstrip("/"))
            info.size = len(f.data)
            info.mode = f.mode
            tar.addfile(info, io.BytesIO(f.data))
    return buf.getvalue()


def _descriptor(media_type: str, blob: bytes) -> dict[str, object]:
    return {"mediaType": media_type, "digest": "sha256:" + hashlib.sha256(blob).hexdigest(),
            "size": len(blob)}


def image_archive(name: str, files: list[File], entrypoint: list[str], user: str) -> bytes:
    """The tarball of an OCI image layout holding one image, `name` (repository:tag)."""
    layer = _layer(files)
    config = json.dumps({
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": entrypoint, "User": user},
        "rootfs": {"type": "layers",
                   "diff_ids": ["sha256:" + hashlib.sha256(layer).hexdigest()]},
    }, sort_keys=True).encode()
    manifest = json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": _descriptor("application/vnd.oci.image.config.v1+json", config),
        "layers": [_descriptor("application/vnd.oci.image.layer.v1.tar", layer)],
    }, sort_keys=True).encode()
    tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else "latest"
    index = json.dumps({
        "schemaVersion": 2,
        "manifests": [{
            **_descriptor("application/vnd.oci.image.manifest.v1+json", manifest),
            # containerd names the import from the first; OCI tools from the second.
            "annotations": {"io.containerd.image.name": name,
                            "org.opencontainers.image.ref.name": tag},
        }],
    }, sort_keys=True).encode()
    blobs = {f"blobs/sha256/{hashlib.sha256(b).hexdigest()}": b
             for b in (layer, config, manifest)}
    return _tar({"oci-layout": b'{"imageLayoutVersion":"1.0.0"}', "index.json": index,
                 **blobs})
