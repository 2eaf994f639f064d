#!/usr/bin/env bash
# Builds the images a kind node image preloads (docs/node.md "kind node image"), from the
# binaries build.sh and e2e/kind/bins.sh built, on bases assembled from Debian's packages, and
# saves each as a tar for e2e/kind/node-image.sh:
#   registry.k8s.io/kube-apiserver, kube-controller-manager, kube-scheduler   v1.37.2
#       /usr/local/bin/<component> on a distroless/static-like base (root, as kubeadm runs them)
#   registry.k8s.io/kube-proxy:v1.37.2
#       Debian trixie minbase with iptables, nftables and conntrack, and an iptables wrapper
#       that takes the node's backend (legacy or nft) the way kube-proxy's distroless-iptables
#       base does
#   registry.k8s.io/etcd:3.7.0-0, registry.k8s.io/coredns/coredns:v1.14.6 (USER 65532, as
#       upstream), registry.k8s.io/pause:3.10 (kind's sandbox image)
#   docker.io/kindest/local-path-helper:v20260131-7181c60a
#       sh (bash), rm and mkdir with their libraries from Debian trixie on the static base: the
#       recipe of kind's images/local-path-helper
#   terdut-local/kind-local-path-provisioner:v0.0.33
#       kind's image is v0.0.34, which the module proxy does not serve: another version gets
#       another name, and node-image.sh points kind's storage manifest at it
# Idempotent: the tars are rewritten only when an image changed. Prints the folder of tars.
set -euo pipefail
cd "$(dirname "$0")/../.."
DOCKER=$(bash e2e/images/engine.sh)
CACHE="${TERDUT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/terdut-operator}"
OUT="$CACHE/images/kind"
WORK="$CACHE/images/kind-work"
K8S_VERSION="${K8S_VERSION:-v1.37.2}"
log() { printf '[kind-images] %s\n' "$*" >&2; }
mkdir -p "$OUT"

K8S_BIN=$(bash e2e/control-plane/build.sh node)
bash e2e/control-plane/build.sh core >/dev/null
KIND_BIN=$(bash e2e/kind/bins.sh all)
RECIPE=$(sha256sum "$0" | cut -c1-12)

# Debian trixie minbase with what kube-proxy runs, once per package list: the source of every
# base.
DEB_PACKAGES=iptables,nftables,conntrack,ca-certificates
DEB="$WORK/debian-trixie-$(echo "$DEB_PACKAGES" | sha256sum | cut -c1-12)"
if [ ! -f "$DEB/.done" ]; then
  command -v debootstrap >/dev/null || { log "debootstrap missing: apt-get install -y debootstrap"; exit 1; }
  log "debootstrap trixie minbase with iptables, nftables, conntrack, ca-certificates (~1 min)"
  rm -rf "$WORK" && mkdir -p "$WORK"
  debootstrap --variant=minbase --include="$DEB_PACKAGES" trixie "$DEB" \
    http://deb.debian.org/debian > "$WORK/debootstrap.log" 2>&1 || { tail -20 "$WORK/debootstrap.log" >&2; exit 1; }
  rm -rf "$DEB"/var/cache/apt/archives/*.deb "$DEB"/var/lib/apt/lists/* "$DEB"/usr/share/doc/* \
    "$DEB"/usr/share/man/* "$DEB"/usr/share/locale/* "$DEB"/var/log/* "$DEB/etc/hostname" "$DEB/etc/resolv.conf"
  touch "$DEB/.done"
fi

# What distroless/static holds: accounts (root, nobody, nonroot 65532), name service and
# protocol tables, time zones, the CA bundle, /tmp.
static_root() {
  local r=$1
  rm -rf "$r" && mkdir -p "$r/etc/ssl/certs" "$r/usr/share" "$r/tmp" "$r/home/nonroot" "$r/root" "$r/usr/local/bin"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$r/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n' > "$r/etc/group"
  cp "$DEB"/etc/{nsswitch.conf,services,protocols,os-release} "$r/etc/"
  cp -a "$DEB/usr/share/zoneinfo" "$r/usr/share/"
  cp "$DEB/etc/ssl/certs/ca-certificates.crt" "$r/etc/ssl/certs/"
  chmod 1777 "$r/tmp"
  chown 65532:65532 "$r/home/nonroot"
}

# import REF ROOT [docker import --change ...]: a one-layer image of ROOT's files.
import() {
  local ref=$1 root=$2
  shift 2
  tar -C "$root" --numeric-owner --xattrs -cf - . | "$DOCKER" import \
    --change 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin' \
    --change "LABEL terdut.recipe=$RECIPE" "$@" - "$ref" >/dev/null
}

refs=()

# Each image is rebuilt only when its binary (or this script) changed: the image keeps the
# binary's checksum as a label.
current() {
  local ref=$1 sum=$2
  [ "$("$DOCKER" image inspect -f '{{index .Config.Labels "terdut.recipe"}}/{{index .Config.Labels "terdut.input"}}' "$ref" 2>/dev/null)" = "$RECIPE/$sum" ]
}
sum() { cat "$@" | sha256sum | cut -c1-12; }

t0=$SECONDS
for c in kube-apiserver kube-controller-manager kube-scheduler; do
  ref="registry.k8s.io/$c:$K8S_VERSION" s=$(sum "$K8S_BIN/$c")
  if ! current "$ref" "$s"; then
    r="$WORK/root-$c"
    static_root "$r"
    install -m 0755 "$K8S_BIN/$c" "$r/usr/local/bin/$c"
    import "$ref" "$r" --change "ENTRYPOINT [\"/usr/local/bin/$c\"]" --change "LABEL terdut.input=$s"
    rm -rf "$r"
  fi
  refs+=("$ref")
done

# kube-proxy calls iptables, ip6tables and their -save/-restore; the wrapper picks the backend
# the node uses (more rules in it), points the alternatives there and runs the command again.
ref="registry.k8s.io/kube-proxy:$K8S_VERSION" s=$(sum "$K8S_BIN/kube-proxy")
if ! current "$ref" "$s"; then
  r="$WORK/root-kube-proxy"
  rm -rf "$r" && cp -a "$DEB" "$r" && rm -f "$r/.done"
  install -m 0755 "$K8S_BIN/kube-proxy" "$r/usr/local/bin/kube-proxy"
  cat > "$r/usr/sbin/iptables-wrapper" <<'EOF'
#!/bin/sh
# Picks iptables' backend on first use: the one (legacy or nft) holding more of the node's
# rules, as kind's entrypoint does for the node itself; then runs the command it stood in for.
set -eu
legacy=$( (iptables-legacy-save || true; ip6tables-legacy-save || true) 2>/dev/null | grep -c '^-' || true)
nft=$( (timeout 5 sh -c 'iptables-nft-save; ip6tables-nft-save' || true) 2>/dev/null | grep -c '^-' || true)
mode=nft
[ "$legacy" -gt "$nft" ] && mode=legacy
# --set puts back the links of the whole group (the -save and -restore ones too), replacing
# the links to this wrapper.
for t in iptables ip6tables; do
  update-alternatives --set "$t" "/usr/sbin/$t-$mode" >/dev/null 2>&1
done
exec "$0" "$@"
EOF
  chmod 0755 "$r/usr/sbin/iptables-wrapper"
  for c in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
    ln -sf iptables-wrapper "$r/usr/sbin/$c"
  done
  import "$ref" "$r" --change 'ENTRYPOINT ["/usr/local/bin/kube-proxy"]' --change "LABEL terdut.input=$s"
  rm -rf "$r"
fi
refs+=("$ref")

# kubeadm's etcd, on the static base (the static pod runs `etcd` from PATH).
ref=registry.k8s.io/etcd:3.7.0-0 s=$(sum "$KIND_BIN/etcd")
if ! current "$ref" "$s"; then
  r="$WORK/root-etcd"
  static_root "$r"
  install -m 0755 "$KIND_BIN/etcd" "$r/usr/local/bin/etcd"
  import "$ref" "$r" --change 'ENTRYPOINT ["/usr/local/bin/etcd"]' --change "LABEL terdut.input=$s"
  rm -rf "$r"
fi
refs+=("$ref")

ref=registry.k8s.io/coredns/coredns:v1.14.6 s=$(sum "$KIND_BIN/coredns")
if ! current "$ref" "$s"; then
  r="$WORK/root-coredns"
  static_root "$r"
  install -m 0755 "$KIND_BIN/coredns" "$r/coredns"
  import "$ref" "$r" --change 'ENTRYPOINT ["/coredns"]' --change 'USER 65532:65532' \
    --change 'EXPOSE 53 53/udp' --change "LABEL terdut.input=$s"
  rm -rf "$r"
fi
refs+=("$ref")

ref=registry.k8s.io/pause:3.10 s=$(sum "$KIND_BIN/pause")
if ! current "$ref" "$s"; then
  r="$WORK/root-pause"
  rm -rf "$r" && mkdir -p "$r"
  install -m 0755 "$KIND_BIN/pause" "$r/pause"
  import "$ref" "$r" --change 'ENTRYPOINT ["/pause"]' --change 'USER 65535:65535' --change "LABEL terdut.input=$s"
  rm -rf "$r"
fi
refs+=("$ref")

ref=terdut-local/kind-local-path-provisioner:v0.0.33 s=$(sum "$KIND_BIN/local-path-provisioner")
if ! current "$ref" "$s"; then
  r="$WORK/root-local-path"
  static_root "$r"
  install -m 0755 "$KIND_BIN/local-path-provisioner" "$r/usr/local/bin/local-path-provisioner"
  import "$ref" "$r" --change 'ENTRYPOINT ["/usr/local/bin/local-path-provisioner"]' --change "LABEL terdut.input=$s"
  rm -rf "$r"
fi
refs+=("$ref")

# The helper pod runs the ConfigMap's setup/teardown scripts: `#!/bin/sh`, mkdir, rm. Each
# program is copied with the libraries ldd names, resolved inside the Debian root.
ref=docker.io/kindest/local-path-helper:v20260131-7181c60a s=$(sum "$DEB/usr/bin/bash" "$DEB/usr/bin/rm" "$DEB/usr/bin/mkdir")
if ! current "$ref" "$s"; then
  r="$WORK/root-local-path-helper"
  static_root "$r"
  # Debian's merged /usr: /bin, /lib and /lib64 are links into /usr.
  mkdir -p "$r/usr/bin" "$r/usr/lib" "$r/usr/lib64"
  for d in bin lib lib64; do ln -s "usr/$d" "$r/$d"; done
  for f in /usr/bin/bash /usr/bin/rm /usr/bin/mkdir \
    $(chroot "$DEB" ldd /usr/bin/bash /usr/bin/rm /usr/bin/mkdir | grep -o '/[^ :]*' | sort -u); do
    rel=${f#/}
    rel=${rel#usr/}
    mkdir -p "$r/usr/$(dirname "$rel")"
    cp -L "$DEB/$f" "$r/usr/$rel"
  done
  ln -s bash "$r/usr/bin/sh"
  import "$ref" "$r" --change "LABEL terdut.input=$s"
  rm -rf "$r"
fi
refs+=("$ref")

for ref in "${refs[@]}"; do
  id=$("$DOCKER" image inspect -f '{{.Id}}' "$ref")
  tar="$OUT/$(echo "$ref" | tr '/:' '__').tar"
  if [ "$(cat "$tar.id" 2>/dev/null)" != "$id" ]; then
    "$DOCKER" save -o "$tar" "$ref"
    echo "$id" > "$tar.id"
  fi
done
log "images ready in $((SECONDS - t0)) s: $(for ref in "${refs[@]}"; do "$DOCKER" image inspect -f "{{.Size}}" "$ref" | awk -v r="$ref" '{printf "%s %.1f MB; ", r, $1/1e6}'; done)"
echo "$OUT"
