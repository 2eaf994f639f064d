#!/usr/bin/env bash
# `just e2e`: the scenario of `just e2e-node` (e2e/runner, `terdut-e2e kind`) on a kind cluster
# of one control-plane and two workers (e2e/kind/cluster.yaml), then what only several nodes
# show (the operator's replicas on different nodes, a worker drained). docs/node.md "kind".
#
# The node image: KIND_NODE_IMAGE if set, else kind's default where a registry gives it (kind's
# published image, unchanged, with kindnetd), else the one e2e/kind/node-image.sh assembles here,
# which has no kindnetd: that cluster sets `networking.disableDefaultCNI: true` and gets its
# network from e2e/kind/cni.sh.
# The provider: KIND_EXPERIMENTAL_PROVIDER if set, else Docker where `docker run --privileged`
# works, else kind's podman provider (Docker before 23.0 cannot start a privileged container on
# a host whose processes lack a capability), with podman's settings from
# e2e/kind/podman-containers.conf through CONTAINERS_CONF. podman needs /lib/modules on the host
# (kind mounts it into every node): an empty one is created where there is none, and removed
# again. Where the host firewall drops forwarded traffic (Docker's FORWARD policy DROP with
# br_netfilter loaded), a rule lets the nodes' traffic across the podman network's bridge, as
# Docker does for its own networks; removed again.
#
# Builds the images from the project's Dockerfiles (public bases where a registry answers, else
# BASES=local), loads them with `kind load image-archive`, runs the scenario (it installs the
# chart with helm itself) and removes everything (e2e/kind/down.sh). KEEP=1 (`just kind-demo`)
# stops after the golden path and leaves the cluster up. The image tags and tars are shared
# with `just e2e-node`: on a shared machine run both under the same lock.
set -euo pipefail
cd "$(dirname "$0")/.."
CLUSTER=${KIND_CLUSTER:-terdut-e2e}
NETWORK=terdut-kind
STATE=.tmp/kind
# A network of its own, not kind's shared "kind"; kind's kubeconfig of its own, not ~/.kube/config.
export KIND_EXPERIMENTAL_DOCKER_NETWORK=$NETWORK KIND_EXPERIMENTAL_PODMAN_NETWORK=$NETWORK
export KUBECONFIG=$PWD/$STATE/kubeconfig
log() { printf '[e2e-kind] %s\n' "$*" >&2; }
t_start=$SECONDS

# The pinned kubectl, helm and promtool (built once into the cache); kind from PATH, else built.
PATH="$(bash e2e/control-plane/build.sh all):$PATH"
command -v kind >/dev/null || PATH="$(bash e2e/control-plane/build.sh kind):$PATH"
DOCKER=$(bash e2e/images/engine.sh)
for t in kubectl helm cargo go; do command -v "$t" >/dev/null || { echo "$t is required" >&2; exit 1; }; done

KIND_SRC=$(GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kind@$(kind version | awk '{print $2}')" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
DEFAULT_IMAGE=$(sed -n 's/^const Image = "\(.*\)"/\1/p' "$KIND_SRC/pkg/apis/config/defaults/image.go")
BASES=${BASES:-public}
t0=$SECONDS
if [ -z "${KIND_NODE_IMAGE:-}" ]; then
  if "$DOCKER" image inspect "$DEFAULT_IMAGE" >/dev/null 2>&1 || "$DOCKER" pull -q "$DEFAULT_IMAGE" >/dev/null 2>&1; then
    KIND_NODE_IMAGE=$DEFAULT_IMAGE
  else
    log "no registry gives $DEFAULT_IMAGE: assembling a node image here (e2e/kind/node-image.sh)"
    KIND_NODE_IMAGE=$(bash e2e/kind/node-image.sh)
    BASES=local
  fi
fi
t_node_image=$((SECONDS - t0))
CNI=$("$DOCKER" image inspect -f '{{index .Config.Labels "terdut.kind.cni"}}' "$KIND_NODE_IMAGE" 2>/dev/null || true)
log "node image $KIND_NODE_IMAGE (${CNI:+CNI: $CNI, }ready in $t_node_image s)"

# The provider, and the node image where it can find it.
NODE_REF=$KIND_NODE_IMAGE
PROVIDER=${KIND_EXPERIMENTAL_PROVIDER:-}
if [ -z "$PROVIDER" ]; then
  if err=$("$DOCKER" run --rm --privileged --entrypoint true "$KIND_NODE_IMAGE" 2>&1); then
    PROVIDER=docker
  elif command -v podman >/dev/null; then
    log "docker cannot start a privileged container here ($(echo "$err" | head -1)): kind's podman provider"
    PROVIDER=podman
  else
    log "docker cannot start a privileged container here and there is no podman: $err"
    exit 1
  fi
fi
mkdir -p "$STATE"
# down.sh reads these, whatever becomes of this run.
echo "$PROVIDER" > "$STATE/provider"
echo "$NETWORK" > "$STATE/network"
bash e2e/kind/down.sh
echo "$PROVIDER" > "$STATE/provider"
echo "$NETWORK" > "$STATE/network"
# Everything goes again when the run ends, unless `just kind-demo` got its cluster up.
trap 'bash e2e/kind/down.sh' EXIT
if [ "$PROVIDER" = podman ]; then
  export KIND_EXPERIMENTAL_PROVIDER=podman CONTAINERS_CONF=$PWD/e2e/kind/podman-containers.conf
  # An image of no registry is looked up by podman as docker.io/... unless it says localhost/.
  case "${KIND_NODE_IMAGE%%/*}" in
    *.*|*:*|localhost) ;;
    *) NODE_REF=localhost/$KIND_NODE_IMAGE
       if ! podman image exists "$NODE_REF"; then
         t0=$SECONDS
         "$DOCKER" save "$KIND_NODE_IMAGE" | podman load -q >/dev/null
         log "node image copied into podman's store in $((SECONDS - t0)) s"
       fi ;;
  esac
  if [ ! -e /lib/modules ]; then
    mkdir /lib/modules
    touch "$STATE/lib-modules-created"
    log "created an empty /lib/modules (kind's podman provider mounts it into every node)"
  fi
fi

# The workers' shared folder (cluster.yaml extraMounts), writable by the stand-in's uid.
mkdir -p .tmp/kind-shared
chmod 0777 .tmp/kind-shared

CONFIG=e2e/kind/cluster.yaml
WAIT=(--wait 180s)
if [ "$CNI" = none ]; then
  CONFIG=$STATE/cluster.yaml
  sed 's/^networking:$/networking:\n  disableDefaultCNI: true/' e2e/kind/cluster.yaml > "$CONFIG"
  grep -q 'disableDefaultCNI: true' "$CONFIG" || { log "could not set disableDefaultCNI in $CONFIG"; exit 1; }
  # kind waits for Ready only once there is a network.
  WAIT=()
fi
t0=$SECONDS
kind create cluster --name "$CLUSTER" --config "$CONFIG" --image "$NODE_REF" --kubeconfig "$KUBECONFIG" "${WAIT[@]}"

# The host's FORWARD chain sees bridged traffic (br_netfilter) and drops what no rule accepts:
# traffic between nodes from a pod's address matches none of podman's rules (they name the
# network's own range). Docker's networks carry such a rule of Docker's; DOCKER-USER is the
# chain Docker leaves to its users.
if [ "$PROVIDER" = podman ] && iptables -S FORWARD 2>/dev/null | grep -qx -- '-P FORWARD DROP' \
   && [ "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null)" = 1 ]; then
  bridge=$(podman network inspect "$NETWORK" --format '{{.NetworkInterface}}')
  chain=FORWARD
  iptables -S DOCKER-USER >/dev/null 2>&1 && chain=DOCKER-USER
  printf '%s\n' "$chain" -i "$bridge" -o "$bridge" -m comment --comment "terdut-kind $CLUSTER: node to node" -j ACCEPT > "$STATE/firewall"
  mapfile -t rule < "$STATE/firewall"
  iptables -I "${rule[@]}"
  log "the host forwards between the nodes on $bridge (iptables $chain, removed by e2e/kind/down.sh)"
fi
if [ "$CNI" = none ]; then
  bash e2e/kind/cni.sh "$CLUSTER" "$PROVIDER"
  kubectl wait --for=condition=Ready nodes --all --timeout=180s >/dev/null
fi
t_cluster=$((SECONDS - t0))
log "cluster $CLUSTER: $(kubectl get nodes --no-headers | wc -l) nodes Ready in $t_cluster s ($PROVIDER)"

t0=$SECONDS
IMAGES=$(BASES=$BASES WITH_PAUSE=0 bash e2e/images/build.sh)
t_images=$((SECONDS - t0))
t0=$SECONDS
for tar in terdut-operator_e2e terdut-standin_e2e terdut-prometheus_e2e; do
  kind load image-archive --name "$CLUSTER" "$IMAGES/$tar.tar"
done
t_load=$((SECONDS - t0))
log "images built in $t_images s, loaded into the nodes in $t_load s"

cargo build -q -p terdut-e2e
t0=$SECONDS
rc=0
KUBECTL=kubectl HELM=helm PROMTOOL="$(command -v promtool || true)" \
  "${CARGO_TARGET_DIR:-target}/debug/terdut-e2e" kind || rc=$?
t_scenario=$((SECONDS - t0))
log "times: node image $t_node_image s, cluster $t_cluster s, images $t_images s + load $t_load s, scenario $t_scenario s, in all $((SECONDS - t_start)) s"
if [ "${KEEP:-0}" = 1 ] && [ "$rc" = 0 ]; then
  trap - EXIT
  cat <<EOF
The cluster stays up (kind cluster $CLUSTER, provider $PROVIDER). Look around:
  export KUBECONFIG=$KUBECONFIG${KIND_EXPERIMENTAL_PROVIDER:+ KIND_EXPERIMENTAL_PROVIDER=$KIND_EXPERIMENTAL_PROVIDER}
  kubectl get nodes -o wide
  kubectl get terdutservers,terdutteams,terdutalertsources -A
  kubectl -n terdut-system get pods -o wide
  kubectl -n terdut-system logs -l app.kubernetes.io/name=terdut-operator --prefix --tail=20
  kubectl -n platform-oncall port-forward svc/terdut 8080 & curl -s localhost:8080/admin/state
Remove it all with: just kind-down
EOF
fi
exit "$rc"
