// terdut-peer-go: peer (d) of `just bench` (docs/performance.md): the TerdutTeam and
// TerdutAlertSource controllers of terdut-operator written as a Kubebuilder user would, on
// controller-runtime, against the same kube-apiserver, CRDs and terdut-server HTTP contract
// (docs/terdut-api.md). TerdutServers are not reconciled here: the bench creates each server's
// operator key Secret and its stand-in, and this peer reads both, as the Rust operator's teams
// read them from their server's actor.
//
// Tuned to be fast (docs/performance.md, "How each peer was tuned"): no client-side rate limit
// (QPS -1, as kube-rs has none), managed fields stripped from the cache, the Secret cache
// restricted to the operator's label, status written by merge patch and only when it changes,
// generation/annotation predicates so its own status writes do not trigger passes, nor its own
// creates of the webhook Secrets it owns, and as many idle HTTP connections per terdut-server
// as reconciles may run at once.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"context"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2/textlogger"
	"net/http"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func main() {
	var (
		namespace     = flag.String("watch-namespace", "", "the one namespace to watch (required)")
		urlTemplate   = flag.String("server-url-template", "http://{name}.{namespace}.svc.{clusterDomain}.:{port}", "URL of a TerdutServer's API")
		clusterDomain = flag.String("cluster-domain", "cluster.local", "for the URL template")
		resync        = flag.Duration("resync", 5*time.Minute, "how often a converged object is checked against the server (±10 %)")
		concurrency   = flag.Int("max-concurrent-reconciles", 1, "reconciles at once per controller (1 is controller-runtime's default)")
		metricsAddr   = flag.String("metrics-addr", "0", "address of /metrics (0: off)")
		verbosity     = flag.Int("v", 0, "log verbosity")
	)
	flag.Parse()
	ctrl.SetLogger(textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(*verbosity))))
	if *namespace == "" {
		fmt.Fprintln(os.Stderr, "--watch-namespace is required")
		os.Exit(2)
	}
	if err := run(*namespace, *urlTemplate, *clusterDomain, *resync, *concurrency, *metricsAddr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(namespace, urlTemplate, clusterDomain string, resync time.Duration, concurrency int, metricsAddr string) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := addKnownTypes(scheme); err != nil {
		return err
	}
	cfg := ctrl.GetConfigOrDie()
	cfg.QPS = -1 // no client-side rate limit, as kube-rs
	cfg.UserAgent = "terdut-peer-go"
	managed := labels.SelectorFromSet(labels.Set{labelManaged: "true"})
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{namespace: {}},
			DefaultTransform:  cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Secret{}: {Label: managed},
			},
		},
	})
	if err != nil {
		return err
	}
	idx := mgr.GetFieldIndexer()
	ctx := ctrl.SetupSignalHandler()
	if err := idx.IndexField(ctx, &TerdutTeam{}, serverRefIndex, func(o client.Object) []string {
		return []string{o.(*TerdutTeam).Spec.ServerRef.Name}
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &TerdutAlertSource{}, teamRefIndex, func(o client.Object) []string {
		return []string{o.(*TerdutAlertSource).Spec.TeamRef.Name}
	}); err != nil {
		return err
	}
	s := &shared{
		Client:        mgr.GetClient(),
		events:        mgr.GetEventRecorder("terdut-operator"),
		http:          &http.Client{Transport: newTransport(concurrency), Timeout: 15 * time.Second},
		urlTemplate:   urlTemplate,
		clusterDomain: clusterDomain,
		resync:        resync,
	}
	// Its own status writes change neither generation nor annotations: they trigger nothing.
	specOrAnnotations := builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))
	opts := controller.Options{MaxConcurrentReconciles: concurrency}

	teamsOfServer := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var teams TerdutTeamList
		if err := mgr.GetClient().List(ctx, &teams, client.InNamespace(o.GetNamespace()),
			client.MatchingFields{serverRefIndex: o.GetName()}); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(teams.Items))
		for _, t := range teams.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&t)})
		}
		return out
	})
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("terdutteam").
		For(&TerdutTeam{}, specOrAnnotations).
		// A server's spec change (its port, its policy) maps to its teams; status does not.
		Watches(&TerdutServer{}, teamsOfServer, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(opts).
		Complete(&TeamReconciler{s}); err != nil {
		return err
	}

	sourcesOfTeam := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var sources TerdutAlertSourceList
		if err := mgr.GetClient().List(ctx, &sources, client.InNamespace(o.GetNamespace()),
			client.MatchingFields{teamRefIndex: o.GetName()}); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(sources.Items))
		for _, src := range sources.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&src)})
		}
		return out
	})
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("terdutalertsource").
		For(&TerdutAlertSource{}, specOrAnnotations).
		// Tuned: a webhook Secret's create is always this controller's own (it creates the
		// Secret in the pass, under the source's name), and its event would run the pass again
		// on a cached source that may not show the status just written yet (a second POST of
		// the integration). Updates and deletions, someone else's, still bring the source back.
		Owns(&corev1.Secret{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false },
		})).
		// A source waits for its team's Ready and id: only a change of those maps to it.
		Watches(&TerdutTeam{}, sourcesOfTeam, builder.WithPredicates(teamReadinessChanged{})).
		WithOptions(opts).
		Complete(&SourceReconciler{s}); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// teamReadinessChanged passes a team's create and delete, and an update that changes its
// Ready condition or its id on the server.
type teamReadinessChanged struct{ predicate.Funcs }

func (teamReadinessChanged) Update(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*TerdutTeam)
	n, ok2 := e.ObjectNew.(*TerdutTeam)
	if !ok1 || !ok2 {
		return true
	}
	ready := func(t *TerdutTeam) bool { return meta.IsStatusConditionTrue(t.Status.Conditions, "Ready") }
	id := func(t *TerdutTeam) int64 {
		if t.Status.TeamID == nil {
			return 0
		}
		return *t.Status.TeamID
	}
	return ready(o) != ready(n) || id(o) != id(n)
}

func (teamReadinessChanged) Create(event.CreateEvent) bool   { return true }
func (teamReadinessChanged) Delete(event.DeleteEvent) bool   { return true }
func (teamReadinessChanged) Generic(event.GenericEvent) bool { return false }
