package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

const group = "terdut.ryuvia.com"

var resources = map[string]string{
	"TerdutServer":      "terdutservers",
	"TerdutTeam":        "terdutteams",
	"TerdutAlertSource": "terdutalertsources",
}

// One object and what both readers should say of it.
type check struct {
	kind, namespace, name string
	kstatus, argo         string
}

// What was read of one object.
type reading struct {
	reason  string
	kstatus *status.Result
	argo    Health
	err     error
}

func (r reading) matches(c check) bool {
	return r.err == nil && string(r.kstatus.Status) == c.kstatus && r.argo.Status == c.argo
}

func parseCheck(arg string) (check, error) {
	obj, want, ok := strings.Cut(arg, "=")
	parts := strings.Split(obj, "/")
	exp := strings.Split(want, ",")
	if !ok || len(parts) != 3 || len(exp) != 2 || resources[parts[0]] == "" {
		return check{}, fmt.Errorf("%q is not KIND/NAMESPACE/NAME=KSTATUS,ARGO", arg)
	}
	return check{kind: parts[0], namespace: parts[1], name: parts[2], kstatus: exp[0], argo: exp[1]}, nil
}

func live(args []string) error {
	fl := flag.NewFlagSet("live", flag.ExitOnError)
	kubeconfig := fl.String("kubeconfig", "", "kubeconfig of the API server")
	luaDir := fl.String("lua", "", "the resource_customizations folder")
	timeout := fl.Duration("timeout", 60*time.Second, "how long the objects may take to be as expected")
	_ = fl.Parse(args)
	var checks []check
	for _, a := range fl.Args() {
		c, err := parseCheck(a)
		if err != nil {
			return err
		}
		checks = append(checks, c)
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	client, err := dynamic.NewForConfig(config)
	if err != nil {
		return err
	}
	scripts := map[string]string{}
	for kind := range resources {
		if scripts[kind], err = healthScript(*luaDir, group, kind); err != nil {
			return err
		}
	}
	// Poll as Flux's wait does: the objects are still converging when this starts.
	deadline := time.Now().Add(*timeout)
	var readings []reading
	for {
		readings = make([]reading, len(checks))
		all := true
		for i, c := range checks {
			readings[i] = read(client, scripts[c.kind], c)
			all = all && readings[i].matches(c)
		}
		if all || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	return report(checks, readings)
}

func read(client dynamic.Interface, script string, c check) reading {
	gvr := schema.GroupVersionResource{Group: group, Version: "v1alpha1", Resource: resources[c.kind]}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, err := client.Resource(gvr).Namespace(c.namespace).Get(ctx, c.name, metav1.GetOptions{})
	if err != nil {
		return reading{err: err}
	}
	r := reading{reason: readyReason(u)}
	if r.kstatus, r.err = status.Compute(u); r.err != nil {
		return r
	}
	r.argo, r.err = argoHealth(script, u.Object)
	return r
}

func readyReason(u *unstructured.Unstructured) string {
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			return fmt.Sprintf("%v=%v", m["reason"], m["status"])
		}
	}
	return "-"
}

func report(checks []check, readings []reading) error {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "KIND\tNAMESPACE/NAME\tREADY\tKSTATUS\tARGO CD\tVERDICT\tKSTATUS MESSAGE")
	failed := 0
	for i, c := range checks {
		r := readings[i]
		verdict := "ok"
		if !r.matches(c) {
			verdict = fmt.Sprintf("FAIL (want %s, %s)", c.kstatus, c.argo)
			failed++
		}
		if r.err != nil {
			fmt.Fprintf(w, "%s\t%s/%s\t-\t-\t-\t%s\t%v\n", c.kind, c.namespace, c.name, verdict, r.err)
			continue
		}
		fmt.Fprintf(w, "%s\t%s/%s\t%s\t%s\t%s\t%s\t%s\n", c.kind, c.namespace, c.name, r.reason, r.kstatus.Status, r.argo.Status, verdict, clip(r.kstatus.Message, 70))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Printf("%d passed, %d failed\n", len(checks)-failed, failed)
	if failed > 0 {
		return fmt.Errorf("%d object(s) not read as expected", failed)
	}
	return nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
