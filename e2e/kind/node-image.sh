#!/usr/bin/env bash
# Assembles a kind node image for Kubernetes v1.37.2 with no registry (docs/node.md "kind node
# image"): the steps of kind's `build node-image` (pkg/build/nodeimage, buildImage and
# prePullImagesAndWriteManifests) done on the base image of e2e/kind/base.sh, with every image
# the node preloads imported from the tars of e2e/kind/images.sh instead of pulled:
#   1. a build container of the base image (`sleep infinity`, seccomp unconfined)
#   2. kubeadm, kubelet, kubectl into /usr/bin, root-owned, executable; /kind/version
#   3. the images the node needs: `kubeadm config images list` with the pause image replaced
#      by containerd's sandbox_image, plus the images of kind's storage manifest, which is
#      written to /kind/manifests/ from kind's source. Not kind's default CNI: kindnetd cannot
#      be built here (the Go module proxy does not serve it), so this image has no
#      /kind/manifests/default-cni.yaml and no kindnetd, and is labelled terdut.kind.cni=none;
#      a cluster of it sets `networking.disableDefaultCNI: true` and gets its network from
#      e2e/kind/cni.sh (docs/node.md "The network without kindnetd")
#   4. containerd started in the container, each tar imported as kind imports its own
#      (`ctr -n k8s.io images import --label=io.cri-containerd.pinned=pinned --all-platforms
#      --no-unpack --digests`), containerd stopped
#   5. `docker commit` with kind's ENTRYPOINT and empty proxy variables
# Every image step 3 names must be there: a missing one stops the build, naming it (nothing is
# pulled, and nothing stands in for it; kind asked for its default CNI on this image fails at
# "failed to read CNI manifest" rather than running something else under kindnetd's name).
# Idempotent: an image whose recipe label matches its inputs is kept. Prints the image name.
set -euo pipefail
cd "$(dirname "$0")/../.."
KIND_VERSION="${KIND_VERSION:-v0.33.0}"
K8S_VERSION="${K8S_VERSION:-v1.37.2}"
DOCKER=$(bash e2e/images/engine.sh)
log() { printf '[kind-node] %s\n' "$*" >&2; }
export GOFLAGS=-mod=mod GOTOOLCHAIN=local

BASE=$(bash e2e/kind/base.sh)
bash e2e/control-plane/build.sh kubeadm >/dev/null
bash e2e/control-plane/build.sh kube >/dev/null
K8S_BIN=$(bash e2e/control-plane/build.sh kubelet)
TARS=$(bash e2e/kind/images.sh)
KIND_SRC=$(go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
NODEIMAGE="$KIND_SRC/pkg/build/nodeimage"
kind_const() { go run e2e/kind/manifests/main.go "$NODEIMAGE" "$1"; }

# kind's storage manifest names local-path-provisioner v0.0.34; the one built here is v0.0.33
# under a name of its own (e2e/kind/images.sh).
PROVISIONER_LOCAL=terdut-local/kind-local-path-provisioner:v0.0.33
STORAGE_MANIFEST=$(kind_const defaultStorageManifest | sed "s#$(kind_const storageProvisionerImage)#$PROVISIONER_LOCAL#")
BINARIES=("$K8S_BIN/kubeadm" "$K8S_BIN/kubelet" "$K8S_BIN/kubectl")

# The tars' image references (each `docker save` tar's manifest.json), and whether a tar exists
# for every image the node needs.
tar_refs() { tar -xOf "$1" manifest.json | jq -r '.[].RepoTags[]'; }
declare -A TAR_OF=()
for t in "$TARS"/*.tar; do
  for ref in $(tar_refs "$t"); do TAR_OF[$ref]=$t; done
done
# Names as containerd records them: docker.io/ and library/ spelled out.
canonical() {
  local r=$1
  case "${r%%/*}" in *.*|*:*|localhost) ;; *) r="docker.io/$r" ;; esac
  case "$r" in docker.io/*/*) ;; docker.io/*) r="docker.io/library/${r#docker.io/}" ;; esac
  echo "$r"
}
declare -A HAVE=()
for ref in "${!TAR_OF[@]}"; do HAVE[$(canonical "$ref")]=${TAR_OF[$ref]}; done

RECIPE=$( { cat "$0" e2e/kind/manifests/main.go; echo "$BASE"; sha256sum "${BINARIES[@]}" | cut -d' ' -f1; cat "$TARS"/*.tar.id; echo "$STORAGE_MANIFEST"; } | sha256sum | cut -c1-12)
IMAGE="terdut-local/kind-node:$K8S_VERSION-$RECIPE"
if "$DOCKER" image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "$IMAGE"
  exit 0
fi

t0=$SECONDS
id="terdut-kind-build-$$"
"$DOCKER" run -d --entrypoint=sleep --name="$id" --security-opt seccomp=unconfined "$BASE" infinity >/dev/null
trap '"$DOCKER" rm -f -v "$id" >/dev/null 2>&1 || true' EXIT
inside() { "$DOCKER" exec -i "$id" "$@"; }

for b in "${BINARIES[@]}"; do
  "$DOCKER" cp "$b" "$id:/usr/bin/$(basename "$b")"
  inside chmod +x "/usr/bin/$(basename "$b")"
  inside chown root:root "/usr/bin/$(basename "$b")"
done
printf '%s' "$K8S_VERSION" | inside sh -c 'cat > /kind/version'

# kubeadm's list, kind's sandbox image instead of kubeadm's pause, kind's storage images.
sandbox=$(inside cat /etc/containerd/config.toml | sed -n 's/^ *sandbox_image *= *"\(.*\)"/\1/p')
required=$(inside kubeadm config images list --kubernetes-version "$K8S_VERSION" | grep -v pause)
required="$required $sandbox $PROVISIONER_LOCAL $(kind_const storageHelperImage)"
missing=()
for ref in $required; do
  [ -n "${HAVE[$(canonical "$ref")]:-}" ] || missing+=("$ref")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "no image for ${missing[*]}: the node would have to pull it, and no registry answers here."
  exit 1
fi

inside mkdir -p /kind/manifests
printf '%s' "$STORAGE_MANIFEST" | inside sh -c 'cat > /kind/manifests/default-storage.yaml'

inside bash -c 'nohup containerd > /dev/null 2>&1 &'
inside bash -c 'for i in 0 1 2 3 4 5; do [ -S /run/containerd/containerd.sock ] && break; sleep "$i"; done; ctr info >/dev/null'
for ref in $required; do
  inside ctr --namespace=k8s.io images import --label=io.cri-containerd.pinned=pinned --all-platforms \
    --no-unpack --digests - < "${HAVE[$(canonical "$ref")]}" >/dev/null
done
inside pkill containerd
# Until it has exited: its zombie stays, `sleep` as PID 1 reaps nothing.
inside bash -c 'while ps -C containerd -o stat= | grep -qv Z; do sleep 0.2; done'

"$DOCKER" commit \
  --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' \
  --change 'ENV HTTP_PROXY="" HTTPS_PROXY="" NO_PROXY=""' \
  --change "LABEL terdut.recipe=$RECIPE terdut.kind.cni=none" "$id" "$IMAGE" >/dev/null
log "$IMAGE built in $((SECONDS - t0)) s, $("$DOCKER" image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.1f MB", $1/1e6}')"
echo "$IMAGE"
