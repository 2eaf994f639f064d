#!/usr/bin/env bash
# Assembles kind's base image (what `kindest/base` holds) locally, for machines that reach no
# container registry (docs/node.md "kind node image"): the steps of kind's
# images/base/Dockerfile, from Debian's packages and kind's own files in its module source.
#   - Debian trixie by debootstrap (kind starts from debian:trixie-slim) with the packages kind's
#     Dockerfile installs, cleaned as its clean-install does
#   - kind's images/base/files (entrypoint, systemd units, containerd config, sysctls, ...) with
#     the modes its COPY --chmod gives them, the systemd units removed, enabled and masked as it
#     does, /etc/kubernetes/manifests
#   - containerd, ctr, its runc shim and runc (the ones `build.sh node` built for the single-node
#     cluster), crictl, the CNI plugins and containerd-fuse-overlayfs-grpc (e2e/kind/bins.sh),
#     /etc/containerd/cri-base.json from `ctr oci spec` as kind makes it
#   - squashed to one layer with kind's ENV, STOPSIGNAL and ENTRYPOINT
# Idempotent: an image whose recipe label matches its inputs is kept. Prints the image name.
set -euo pipefail
cd "$(dirname "$0")/../.."
KIND_VERSION="${KIND_VERSION:-v0.33.0}"
DOCKER=$(bash e2e/images/engine.sh)
CACHE="${TERDUT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/terdut-operator}"
WORK="$CACHE/images/kind-base"
log() { printf '[kind-base] %s\n' "$*" >&2; }
export GOFLAGS=-mod=mod GOTOOLCHAIN=local

bash e2e/control-plane/build.sh containerd >/dev/null
K8S_BIN=$(bash e2e/control-plane/build.sh runc)
KIND_BIN=$(bash e2e/kind/bins.sh all)
KIND_SRC=$(go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
FILES="$KIND_SRC/images/base/files"
[ -d "$FILES" ] || { log "no images/base/files in $KIND_SRC"; exit 1; }

# kind's Dockerfile's package list, line by line: services (systemd); Kubernetes' needs;
# networked storage; storage e2e tests; the container runtime; kind's own; semi-core.
PACKAGES=systemd,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,fuse-overlayfs,nfs-common,open-iscsi,e2fsprogs,bash,ca-certificates,curl,jq,procps
BINARIES=("$K8S_BIN/containerd" "$K8S_BIN/ctr" "$K8S_BIN/containerd-shim-runc-v2" "$K8S_BIN/runc"
  "$KIND_BIN/crictl" "$KIND_BIN/host-local" "$KIND_BIN/loopback" "$KIND_BIN/ptp" "$KIND_BIN/portmap"
  "$KIND_BIN/containerd-fuse-overlayfs-grpc")
RECIPE=$( { cat "$0"; echo "$PACKAGES"; (cd "$FILES" && find . -type f | sort | xargs sha256sum); sha256sum "${BINARIES[@]}" | cut -d' ' -f1; } | sha256sum | cut -c1-12)
IMAGE="terdut-local/kind-base:$KIND_VERSION-$RECIPE"

if "$DOCKER" image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "$IMAGE"
  exit 0
fi
command -v debootstrap >/dev/null || { log "debootstrap missing: apt-get install -y debootstrap"; exit 1; }
t0=$SECONDS
log "assembling $IMAGE: debootstrap trixie with kind's packages (~3 min), kind's files, the runtime"
root="$WORK/root"
rm -rf "$WORK" && mkdir -p "$WORK"
debootstrap --variant=minbase --include="$PACKAGES" trixie "$root" http://deb.debian.org/debian \
  > "$WORK/debootstrap.log" 2>&1 || { tail -20 "$WORK/debootstrap.log" >&2; exit 1; }
log "debootstrap done ($((SECONDS - t0)) s)"

# COPY --chmod=0755 files/usr/local/bin/*, 0644 files/kind/ (0755 kind/bin), 0644 LICENSES,
# etc/*, etc/containerd/*, etc/default/*, etc/sysctl.d/*, etc/systemd/system/* and
# etc/systemd/system/kubelet.service.d/*.
install -d -m 0755 "$root/usr/local/bin" "$root/kind/bin" "$root/LICENSES" "$root/etc/containerd" \
  "$root/etc/default" "$root/etc/sysctl.d" "$root/etc/systemd/system/kubelet.service.d"
install -m 0755 "$FILES"/usr/local/bin/* "$root/usr/local/bin/"
install -m 0644 "$FILES"/kind/README.txt "$root/kind/"
install -m 0755 "$FILES"/kind/bin/* "$root/kind/bin/"
install -m 0644 "$FILES"/LICENSES/* "$root/LICENSES/"
find "$FILES/etc" -maxdepth 1 -type f -exec install -m 0644 {} "$root/etc/" \;
install -m 0644 "$FILES"/etc/containerd/* "$root/etc/containerd/"
install -m 0644 "$FILES"/etc/default/* "$root/etc/default/"
install -m 0644 "$FILES"/etc/sysctl.d/* "$root/etc/sysctl.d/"
find "$FILES/etc/systemd/system" -maxdepth 1 -type f -exec install -m 0644 {} "$root/etc/systemd/system/" \;
install -m 0644 "$FILES"/etc/systemd/system/kubelet.service.d/* "$root/etc/systemd/system/kubelet.service.d/"

# The Dockerfile's first RUN after its apt-get (clean-install's cleanup included).
find "$root/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
rm -f "$root"/lib/systemd/system/multi-user.target.wants/* "$root"/etc/systemd/system/*.wants/* \
  "$root"/lib/systemd/system/local-fs.target.wants/* "$root"/lib/systemd/system/sockets.target.wants/*udev* \
  "$root"/lib/systemd/system/sockets.target.wants/*initctl* "$root"/lib/systemd/system/basic.target.wants/*
echo "ReadKMsg=no" >> "$root/etc/systemd/journald.conf"
ln -sf /usr/lib/systemd/systemd "$root/sbin/init"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/debconf/* "$root"/var/lib/apt/lists/* \
  "$root"/var/log/* "$root"/tmp/* "$root"/var/tmp/* "$root"/usr/share/doc/* "$root"/usr/share/doc-base/* \
  "$root"/usr/share/man/* "$root"/usr/share/local/*
# debootstrap leaves the build machine's name and resolver behind; docker provides both.
rm -f "$root/etc/hostname" "$root/etc/resolv.conf"
# The next two RUNs: services enabled and masked (systemctl edits links, no running systemd
# needed), and the manifests folder a kubeadm package would make.
chroot "$root" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
chroot "$root" systemctl mask systemd-binfmt.service >/dev/null 2>&1
mkdir -p "$root/etc/kubernetes/manifests"

# The final stage's binaries and the runtime spec kind derives from `ctr oci spec`.
install -m 0755 "$K8S_BIN/containerd" "$K8S_BIN/ctr" "$K8S_BIN/containerd-shim-runc-v2" "$root/usr/local/bin/"
install -d -m 0755 "$root/usr/local/sbin" "$root/opt/cni/bin"
install -m 0755 "$K8S_BIN/runc" "$root/usr/local/sbin/runc"
install -m 0755 "$KIND_BIN/crictl" "$KIND_BIN/containerd-fuse-overlayfs-grpc" "$root/usr/local/bin/"
install -m 0755 "$KIND_BIN/host-local" "$KIND_BIN/loopback" "$KIND_BIN/ptp" "$KIND_BIN/portmap" "$root/opt/cni/bin/"
"$K8S_BIN/ctr" oci spec \
  | jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \
  | jq 'del(.process.rlimits)' > "$root/etc/containerd/cri-base.json"
chroot "$root" /usr/local/sbin/runc --version >/dev/null

tar -C "$root" --numeric-owner --xattrs -cf - . | "$DOCKER" import \
  --change 'ENV container=docker' \
  --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' \
  --change "LABEL terdut.recipe=$RECIPE terdut.kind=$KIND_VERSION" - "$IMAGE-squashed" >/dev/null
# `docker import` takes no STOPSIGNAL: a Dockerfile of one line adds it (metadata, no layer).
printf 'FROM %s\nSTOPSIGNAL SIGRTMIN+3\n' "$IMAGE-squashed" | DOCKER_BUILDKIT=0 "$DOCKER" build -q -t "$IMAGE" - >/dev/null
"$DOCKER" rmi "$IMAGE-squashed" >/dev/null
rm -rf "$WORK"
log "$IMAGE built in $((SECONDS - t0)) s, $("$DOCKER" image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.1f MB", $1/1e6}')"
echo "$IMAGE"
