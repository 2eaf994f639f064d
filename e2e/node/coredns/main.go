// The node's cluster DNS (docs/node.md): CoreDNS with only the plugins its Corefile uses.
// CoreDNS' own main imports every plugin, and with them the SDKs of Azure, AWS, GCP and more;
// e2e/control-plane/build.sh builds this file against the pinned CoreDNS module instead.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() {
	coremain.Run()
}
