// terdut-health reads the health of terdut-operator's kinds with the libraries gitops tools
// use (docs/gitops.md): kstatus from sigs.k8s.io/cli-utils (Flux's `wait`, Helm's wait on
// custom resources, kpt) and the Argo CD health checks of deploy/argocd, run by gopher-lua the
// way Argo CD runs an argocd-cm script.
//
//	terdut-health lua-tests DIR
//	    every health_test.yaml case under DIR (Argo CD's resource_customizations layout), and
//	    DIR/../argocd-cm.yaml is what `argocd-cm DIR` prints
//	terdut-health argocd-cm DIR
//	    the argocd-cm patch that installs DIR's health checks
//	terdut-health live --kubeconfig FILE --lua DIR [--timeout 60s] KIND/NS/NAME=KSTATUS,ARGO...
//	    each live object's kstatus and Argo CD health, polled until each is as expected
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "lua-tests":
		err = luaTests(os.Args[2:])
	case "argocd-cm":
		err = printArgocdCM(os.Args[2:])
	case "live":
		err = live(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "terdut-health:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: terdut-health lua-tests DIR | argocd-cm DIR | live --kubeconfig FILE --lua DIR [--timeout D] KIND/NS/NAME=KSTATUS,ARGO...")
	os.Exit(2)
}
