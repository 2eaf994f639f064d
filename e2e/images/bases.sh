#!/usr/bin/env bash
# Assembles the two base images the Dockerfiles take as build arguments, locally, for machines
# that reach no container registry (docs/node.md "Images"):
#   terdut-local/cc-debian12:nonroot  what gcr.io/distroless/cc-debian12:nonroot holds for a
#                                     glibc Rust binary: the files of Debian's base-files,
#                                     netbase, tzdata, libc6, libgcc-s1, libstdc++6 and
#                                     ca-certificates (as the bundle update-ca-certificates
#                                     makes), /etc/passwd and
#                                     /etc/group with nonroot 65532, USER 65532:65532
#   terdut-local/rust:1.95-bookworm   what docker.io/library/rust:1.95-bookworm is for the build
#                                     stage: Debian bookworm (debootstrap minbase, gcc,
#                                     libc6-dev, ca-certificates; make, with which
#                                     tikv-jemalloc-sys builds jemalloc) and this machine's Rust
#                                     toolchain (no docs) in /usr/local/rust, CARGO_HOME
#                                     /usr/local/cargo as in the official image, and the
#                                     CA certificates this machine trusts
# Idempotent: an image whose recipe label matches this script is kept. Prints the two names.
set -euo pipefail
cd "$(dirname "$0")/../.."
DOCKER=$(bash e2e/images/engine.sh)
CACHE="${TERDUT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/terdut-operator}"
WORK="$CACHE/images/bases"
RECIPE=$(sha256sum "$0" | cut -c1-12)
RUNTIME=terdut-local/cc-debian12:nonroot
BUILDER=terdut-local/rust:1.95-bookworm
log() { printf '[bases] %s\n' "$*" >&2; }

current() {
  [ "$("$DOCKER" image inspect -f '{{index .Config.Labels "terdut.recipe"}}' "$1" 2>/dev/null)" = "$RECIPE" ]
}

# The accounts distroless ships; nonroot is the one the images run as.
write_accounts() {
  local root=$1
  mkdir -p "$root/etc" "$root/home/nonroot" "$root/root" "$root/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$root/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n' > "$root/etc/group"
  chmod 1777 "$root/tmp"
  chown 65532:65532 "$root/home/nonroot"
}

build_runtime() {
  current "$RUNTIME" && return 0
  log "assembling $RUNTIME from Debian packages"
  local w="$WORK/runtime" root="$WORK/runtime/root"
  rm -rf "$w" && mkdir -p "$root" "$w/debs"
  (cd "$w/debs" && apt-get download -q base-files netbase tzdata libc6 libgcc-s1 libstdc++6 ca-certificates >&2)
  for deb in "$w"/debs/*.deb; do dpkg -x "$deb" "$root"; done
  # update-ca-certificates would concatenate every certificate ca-certificates ships.
  mkdir -p "$root/etc/ssl/certs"
  cat "$root"/usr/share/ca-certificates/mozilla/*.crt > "$root/etc/ssl/certs/ca-certificates.crt"
  # Documentation and package scripts are not part of a distroless image.
  rm -rf "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/share/lintian" "$root/usr/share/ca-certificates" \
    "$root/usr/sbin" "$root/usr/bin" "$root/etc/init.d" "$root/etc/default"
  write_accounts "$root"
  tar -C "$root" --numeric-owner -cf - . | "$DOCKER" import \
    --change 'USER 65532:65532' --change 'WORKDIR /home/nonroot' \
    --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
    --change "LABEL terdut.recipe=$RECIPE" - "$RUNTIME" >/dev/null
  rm -rf "$w"
}

build_builder() {
  current "$BUILDER" && return 0
  command -v debootstrap >/dev/null || { log "debootstrap missing: apt-get install -y debootstrap"; exit 1; }
  log "assembling $BUILDER: debootstrap bookworm and this machine's Rust toolchain (~2 min)"
  local w="$WORK/builder" root="$WORK/builder/root" sysroot
  rm -rf "$w" && mkdir -p "$w"
  debootstrap --variant=minbase --include=gcc,libc6-dev,ca-certificates,make bookworm "$root" \
    http://deb.debian.org/debian > "$w/debootstrap.log" 2>&1 || { tail -20 "$w/debootstrap.log" >&2; exit 1; }
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  # The build stage downloads crates through this machine's network, so it trusts what this
  # machine trusts (here that includes the egress proxy's CA). The runtime base does not.
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  sysroot=$(rustc --print sysroot)
  mkdir -p "$root/usr/local/rust" "$root/usr/local/cargo"
  # The toolchain without its 800 MB of HTML docs.
  tar -C "$sysroot" --exclude=./share/doc -cf - . | tar -C "$root/usr/local/rust" -xf -
  tar -C "$root" --numeric-owner -cf - . | "$DOCKER" import \
    --change 'ENV PATH=/usr/local/cargo/bin:/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin CARGO_HOME=/usr/local/cargo' \
    --change "LABEL terdut.recipe=$RECIPE terdut.rustc=\"$(rustc --version)\"" - "$BUILDER" >/dev/null
  rm -rf "$w"
}

build_runtime
build_builder
echo "BUILDER=$BUILDER RUNTIME=$RUNTIME"
