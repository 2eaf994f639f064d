#!/usr/bin/env python3
"""The operator image as an OCI image layout and archive, the same bytes from the same inputs.

`docker build` stamps build times into the image config and file times into the layers it
writes, so two builds of one commit differ. This takes the image `docker build` made (a
`docker save` archive) and its base (another), checks that the image's lower layers are the
base's layers exactly (by their diff ids), and writes an OCI image whose only inputs are the
files, the Dockerfile's settings and one timestamp (the commit's, SOURCE_DATE_EPOCH):

  - the base's layers verbatim (gzip without a name or time);
  - every layer above the base rewritten: entries in name order, every time the epoch, owner
    names dropped (numeric ids, modes, links and contents kept), then gzipped the same way;
  - the config's Env, User, WorkingDir, ExposedPorts, Entrypoint and Cmd as `docker build` set
    them, labels plus the OCI annotations given, `created` and every history entry at the epoch,
    and no builder details (container, docker_version);
  - JSON written with sorted keys and no spaces, a tar with sorted entries owned by 0:0.

Prints the manifest's digest. Usage:
  oci.py --image saved.tar --base base.tar --epoch N --out DIR [--archive F.tar]
         [--base-name REF] [--base-digest sha256:...] [--annotation key=value ...] [--info F]
Without --base-digest the base's digest is that of the base written the same way (its layers
and config as here, its own manifest), which `--write-base DIR` stores as a layout too.
Stdlib only.
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
KEPT_CONFIG = ("Env", "User", "WorkingDir", "ExposedPorts", "Entrypoint", "Cmd", "Labels",
               "StopSignal", "Volumes")


def dumps(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def sha(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def rfc3339(epoch):
    import datetime
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class DockerArchive:
    """A `docker save` archive (one image): its config and its layers' uncompressed tars."""

    def __init__(self, path):
        self.tar = tarfile.open(path)
        manifest = json.load(self.tar.extractfile("manifest.json"))
        if len(manifest) != 1:
            sys.exit(f"oci: {path} holds {len(manifest)} images, want one")
        self.config = json.load(self.tar.extractfile(manifest[0]["Config"]))
        self.layer_paths = manifest[0]["Layers"]
        self.diff_ids = self.config["rootfs"]["diff_ids"]
        if len(self.diff_ids) != len(self.layer_paths):
            sys.exit(f"oci: {path}: {len(self.layer_paths)} layers but {len(self.diff_ids)} diff ids")

    def layer(self, i):
        data = self.tar.extractfile(self.layer_paths[i]).read()
        if sha(data) != self.diff_ids[i]:
            sys.exit(f"oci: layer {i} does not match its diff id {self.diff_ids[i]}")
        return data


def normalize_layer(data, epoch):
    """The layer's entries in name order, times at `epoch`, no owner names."""
    src = tarfile.open(fileobj=io.BytesIO(data))
    members = sorted(src.getmembers(), key=lambda m: m.name)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as dst:
        for m in members:
            m.mtime = epoch
            m.uname = m.gname = ""
            m.pax_headers = {}
            dst.addfile(m, src.extractfile(m) if m.isreg() else None)
    return out.getvalue()


def gz(data):
    return gzip.compress(data, compresslevel=9, mtime=0)


class Layout:
    """An OCI image layout being written: blobs by digest."""

    def __init__(self, root):
        self.root = root
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(os.path.join(root, "blobs", "sha256"))

    def blob(self, data, media_type, annotations=None):
        digest = sha(data)
        with open(os.path.join(self.root, "blobs", "sha256", digest.split(":")[1]), "wb") as f:
            f.write(data)
        d = {"mediaType": media_type, "digest": digest, "size": len(data)}
        if annotations:
            d["annotations"] = annotations
        return d

    def finish(self, manifest_desc, platform, ref_name):
        desc = dict(manifest_desc, platform=platform)
        desc.setdefault("annotations", {})["org.opencontainers.image.ref.name"] = ref_name
        with open(os.path.join(self.root, "index.json"), "wb") as f:
            f.write(dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                           "manifests": [desc]}))
        with open(os.path.join(self.root, "oci-layout"), "wb") as f:
            f.write(dumps({"imageLayoutVersion": "1.0.0"}))


def image_config(docker_config, diff_ids, history, epoch, labels):
    cfg = {k: v for k, v in (docker_config.get("config") or {}).items() if k in KEPT_CONFIG and v}
    if labels:
        cfg["Labels"] = dict(cfg.get("Labels") or {}, **labels)
    return {
        "architecture": docker_config.get("architecture", "amd64"),
        "os": docker_config.get("os", "linux"),
        "created": rfc3339(epoch),
        "config": cfg,
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "history": history,
    }


def history_at(entries, epoch):
    out = []
    for h in entries:
        e = {"created": rfc3339(epoch)}
        for k in ("created_by", "comment", "empty_layer"):
            if h.get(k):
                e[k] = h[k]
        out.append(e)
    return out


def write_image(layout, docker, layers, diff_ids, epoch, labels, annotations, ref_name):
    """Blobs, config and manifest of one image into `layout`; returns the manifest's descriptor."""
    history = history_at(docker.config.get("history") or [], epoch)
    if len([h for h in history if not h.get("empty_layer")]) != len(layers):
        history = [{"created": rfc3339(epoch)} for _ in layers]
    config = dumps(image_config(docker.config, diff_ids, history, epoch, labels))
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": layout.blob(config, CONFIG),
        "layers": [layout.blob(gz(data), LAYER) for data in layers],
    }
    if annotations:
        manifest["annotations"] = annotations
    desc = layout.blob(dumps(manifest), MANIFEST)
    platform = {"architecture": docker.config.get("architecture", "amd64"),
                "os": docker.config.get("os", "linux")}
    layout.finish(desc, platform, ref_name)
    return desc


def archive(root, path, epoch):
    """The layout as one tar: sorted entries, owned by 0:0, times at `epoch`."""
    names = []
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for n in sorted(dirs + files):
            names.append(os.path.join(d, n))
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
        for full in sorted(names, key=lambda p: os.path.relpath(p, root)):
            info = t.gettarinfo(full, os.path.relpath(full, root))
            info.mtime, info.uid, info.gid, info.uname, info.gname = epoch, 0, 0, "", ""
            info.mode = 0o755 if info.isdir() else 0o644
            info.pax_headers = {}
            with open(full, "rb") if info.isreg() else io.BytesIO() as f:
                t.addfile(info, f if info.isreg() else None)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--image", required=True, help="docker save archive of the built image")
    p.add_argument("--base", required=True, help="docker save archive of its base")
    p.add_argument("--epoch", type=int, required=True, help="SOURCE_DATE_EPOCH: the commit's time")
    p.add_argument("--out", required=True, help="the OCI image layout to write")
    p.add_argument("--archive", help="also write the layout as this tar")
    p.add_argument("--ref-name", default="latest", help="org.opencontainers.image.ref.name in index.json")
    p.add_argument("--base-name", help="org.opencontainers.image.base.name")
    p.add_argument("--base-digest", help="the base's registry digest (else computed here)")
    p.add_argument("--write-base", help="also write the base as an OCI layout here")
    p.add_argument("--annotation", action="append", default=[], help="key=value on the manifest and as a label")
    p.add_argument("--info", help="write {digest, baseDigest, layers} of the image here as JSON")
    a = p.parse_args()

    image, base = DockerArchive(a.image), DockerArchive(a.base)
    n = len(base.diff_ids)
    if image.diff_ids[:n] != base.diff_ids:
        sys.exit("oci: the image is not built on this base: its lower layers differ from the base's")
    base_layers = [base.layer(i) for i in range(n)]

    base_digest = a.base_digest
    if not base_digest:
        base_layout = Layout(a.write_base or a.out + ".base")
        desc = write_image(base_layout, base, base_layers, base.diff_ids, a.epoch, {}, {}, "base")
        base_digest = desc["digest"]
        if not a.write_base:
            shutil.rmtree(base_layout.root)

    annotations = dict(kv.split("=", 1) for kv in a.annotation)
    annotations["org.opencontainers.image.created"] = rfc3339(a.epoch)
    annotations["org.opencontainers.image.base.digest"] = base_digest
    if a.base_name:
        annotations["org.opencontainers.image.base.name"] = a.base_name

    upper = [normalize_layer(image.layer(i), a.epoch) for i in range(n, len(image.diff_ids))]
    layers = base_layers + upper
    diff_ids = base.diff_ids + [sha(d) for d in upper]
    layout = Layout(a.out)
    desc = write_image(layout, image, layers, diff_ids, a.epoch, annotations, annotations, a.ref_name)
    if a.archive:
        archive(a.out, a.archive, a.epoch)
    if a.info:
        with open(a.info, "w") as f:
            json.dump({"digest": desc["digest"], "baseDigest": base_digest, "layers": len(layers)}, f)
    print(desc["digest"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
