// CoreDNS for the kind node image (e2e/kind/bins.sh): the plugins of the Corefile kubeadm
// deploys (errors, health, ready, kubernetes, prometheus, forward, cache, loop, reload,
// loadbalance) and log. The full plugin set pulls in every cloud provider's SDK. The order the
// plugins run in is CoreDNS's own (core/dnsserver's directive list), not this file's.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() {
	coremain.Run()
}
