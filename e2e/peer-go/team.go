package main

// The TerdutTeam controller, as a Kubebuilder user writes one: a finalizer, the cached client
// for every read, a status patch only when the status changes, Events for what was done on the
// server, RequeueAfter for the periodic drift check. The same calls as the Rust operator's team
// pass (docs/design.md §4.2): with a known id GET team, escalation and switches (three reads);
// without one the idempotent POST, and for a team it created (201) no reads at all.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

const (
	teamFinalizer   = "terdut.ryuvia.com/team-cleanup"
	sourceFinalizer = "terdut.ryuvia.com/source-cleanup"
	// The index of teams by the TerdutServer they name, and of sources by their team.
	serverRefIndex = "spec.serverRef.name"
	teamRefIndex   = "spec.teamRef.name"
)

// shared is what both reconcilers need.
type shared struct {
	client.Client
	events        recorder.EventRecorder
	http          *http.Client
	urlTemplate   string
	clusterDomain string
	resync        time.Duration
}

// jittered is the resync period ±10 %, as the Rust operator's (docs/design.md §5).
func (s *shared) jittered() ctrl.Result {
	f := 0.9 + 0.2*rand.Float64()
	return ctrl.Result{RequeueAfter: time.Duration(float64(s.resync) * f)}
}

// access finds the TerdutServer and its operator key in the cache. A reason means the pass
// stops with that (not Ready) reason.
func (s *shared) access(ctx context.Context, namespace string, ref ObjectRef) (*terdut, string, string) {
	ns := ref.Namespace
	if ns == "" {
		ns = namespace
	}
	if ns != namespace {
		// The Rust operator asks the server's policy (docs/design.md §4.6); this peer is
		// benchmarked on same-namespace references only.
		return nil, "RefNotPermitted", "cross-namespace server references are not supported here"
	}
	var srv TerdutServer
	if err := s.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, &srv); err != nil {
		return nil, "ServerRefNotFound", fmt.Sprintf("TerdutServer %s/%s not found", ns, ref.Name)
	}
	var key corev1.Secret
	if err := s.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name + "-operator-key"}, &key); err != nil {
		return nil, "WaitingForServer", "the server's operator key is not there yet"
	}
	token := string(key.Data["token"])
	if token == "" {
		return nil, "WaitingForServer", "the server's operator key is empty"
	}
	return &terdut{
		base: serverURL(s.urlTemplate, srv.Name, srv.Namespace, s.clusterDomain, srv.Spec.Networking.ServicePort),
		key:  token,
		http: s.http,
	}, "", ""
}

// setReady sets the Ready condition; meta.SetStatusCondition keeps the transition time when
// the status does not change.
func setReady(conds *[]metav1.Condition, ok bool, reason, message string, generation int64) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: "Ready", Status: status, Reason: reason, Message: message, ObservedGeneration: generation,
	})
}

type TeamReconciler struct{ *shared }

func (r *TeamReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var team TerdutTeam
	if err := r.Get(ctx, req.NamespacedName, &team); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !team.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &team)
	}
	if !controllerutil.ContainsFinalizer(&team, teamFinalizer) {
		// A merge patch, not an Update: no conflict with a status write in flight.
		patch := client.MergeFrom(team.DeepCopy())
		controllerutil.AddFinalizer(&team, teamFinalizer)
		if err := r.Patch(ctx, &team, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	before := team.DeepCopy()
	result, err := r.converge(ctx, &team)
	if err != nil {
		return ctrl.Result{}, err
	}
	gen := team.Generation
	team.Status.ObservedGeneration = &gen
	if !reflect.DeepEqual(before.Status, team.Status) {
		if err := r.Status().Patch(ctx, &team, client.MergeFrom(before)); err != nil {
			if apierrors.IsNotFound(err) {
				return ctrl.Result{}, nil
			}
			return ctrl.Result{}, err
		}
	}
	return result, nil
}

func (r *TeamReconciler) converge(ctx context.Context, team *TerdutTeam) (ctrl.Result, error) {
	api, reason, message := r.access(ctx, team.Namespace, team.Spec.ServerRef)
	if reason != "" {
		setReady(&team.Status.Conditions, false, reason, message, team.Generation)
		if reason == "WaitingForServer" {
			return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
		}
		return r.jittered(), nil
	}
	desired, err := desiredTeam(team)
	if err != nil {
		setReady(&team.Status.Conditions, false, "InvalidSpec", err.Error(), team.Generation)
		return r.jittered(), nil
	}
	state, err := r.observe(ctx, api, team, desired)
	if err != nil {
		if isStatus(err, http.StatusConflict) {
			setReady(&team.Status.Conditions, false, "TeamNameTaken",
				fmt.Sprintf("the name %q belongs to another team on the server", desired.Name), team.Generation)
			return r.jittered(), nil
		}
		return ctrl.Result{}, err
	}
	id := state.team.ID
	team.Status.TeamID = &id
	if err := r.apply(ctx, api, team, desired, state); err != nil {
		return ctrl.Result{}, err
	}
	setReady(&team.Status.Conditions, true, "Ready",
		fmt.Sprintf("team %d on the server matches the spec", id), team.Generation)
	return r.jittered(), nil
}

// serverState is the team as the server holds it.
type serverState struct {
	team     apiTeam
	ladder   *apiLadder
	switches []apiSwitch
}

func externalID(namespace, name string) string { return namespace + "/" + name }

func (r *TeamReconciler) observe(ctx context.Context, api *terdut, team *TerdutTeam, d desired) (*serverState, error) {
	if id := team.Status.TeamID; id != nil {
		var t apiTeam
		_, err := api.call(ctx, http.MethodGet, teamPath(*id), nil, &t)
		switch {
		case err == nil && t.ExternalID == d.ExternalID:
			return r.readRest(ctx, api, t)
		case err != nil && !isStatus(err, http.StatusNotFound):
			return nil, err
		}
	}
	var t apiTeam
	code, err := api.call(ctx, http.MethodPost, "/api/v1/teams",
		map[string]string{"name": d.Name, "external_id": d.ExternalID}, &t)
	if err != nil {
		return nil, err
	}
	if code == http.StatusCreated {
		// A new team has no ladder and no switches: nothing to read.
		return &serverState{team: t}, nil
	}
	return r.readRest(ctx, api, t)
}

func (r *TeamReconciler) readRest(ctx context.Context, api *terdut, t apiTeam) (*serverState, error) {
	s := &serverState{team: t}
	var ladder apiLadder
	if _, err := api.call(ctx, http.MethodGet, teamPath(t.ID, "/escalation"), nil, &ladder); err == nil {
		s.ladder = &ladder
	} else if !isStatus(err, http.StatusNotFound) {
		return nil, err
	}
	if _, err := api.call(ctx, http.MethodGet, teamPath(t.ID, "/deadman-switches"), nil, &s.switches); err != nil {
		return nil, err
	}
	return s, nil
}

// apply makes the calls that bring the server to the spec, in the order of docs/design.md
// §4.2, with an Event for each.
func (r *TeamReconciler) apply(ctx context.Context, api *terdut, team *TerdutTeam, d desired, s *serverState) error {
	id := s.team.ID
	note := func(reason, action, format string, args ...any) {
		r.events.Eventf(team, nil, corev1.EventTypeNormal, reason, action, format, args...)
	}
	if s.team.Name != d.Name {
		if _, err := api.call(ctx, http.MethodPut, teamPath(id, "/name"), map[string]string{"name": d.Name}, nil); err != nil {
			return err
		}
		note("TeamRenamed", "Rename", "renamed team %d from %q to %q", id, s.team.Name, d.Name)
	}
	if !reflect.DeepEqual(s.team.Oidc, d.Oidc) {
		if _, err := api.call(ctx, http.MethodPut, teamPath(id, "/oidc-groups"), d.Oidc, nil); err != nil {
			return err
		}
		note("OidcGroupsApplied", "SetOidcGroups", "set the OIDC groups of team %d", id)
	}
	switch {
	case d.Ladder == nil && s.ladder != nil:
		if _, err := api.call(ctx, http.MethodDelete, teamPath(id, "/escalation"), nil, nil); err != nil && !isStatus(err, http.StatusNotFound) {
			return err
		}
		note("EscalationCleared", "DeleteEscalation", "cleared the escalation ladder of team %d", id)
	case d.Ladder != nil && !reflect.DeepEqual(d.Ladder, s.ladder):
		if _, err := api.call(ctx, http.MethodPut, teamPath(id, "/escalation"), d.Ladder, nil); err != nil {
			return err
		}
		note("EscalationApplied", "PutEscalation", "applied the escalation ladder of team %d", id)
	}
	have := map[string]apiSwitch{}
	for _, sw := range s.switches {
		have[sw.Name] = sw
	}
	for _, want := range d.Switches {
		got, ok := have[want.Name]
		delete(have, want.Name)
		switch {
		case !ok:
			if _, err := api.call(ctx, http.MethodPost, teamPath(id, "/deadman-switches"), want, nil); err != nil {
				return err
			}
			note("SwitchCreated", "CreateSwitch", "created dead man's switch %q of team %d", want.Name, id)
		case got.Matcher != want.Matcher || got.TimeoutSeconds != want.TimeoutSeconds || got.Severity != want.Severity:
			if _, err := api.call(ctx, http.MethodPut, teamPath(id, fmt.Sprintf("/deadman-switches/%d", got.ID)), want, nil); err != nil {
				return err
			}
			note("SwitchUpdated", "UpdateSwitch", "updated dead man's switch %q of team %d", want.Name, id)
		}
	}
	for _, extra := range have {
		if _, err := api.call(ctx, http.MethodDelete, teamPath(id, fmt.Sprintf("/deadman-switches/%d", extra.ID)), nil, nil); err != nil && !isStatus(err, http.StatusNotFound) {
			return err
		}
		note("SwitchDeleted", "DeleteSwitch", "deleted dead man's switch %q of team %d", extra.Name, id)
	}
	return nil
}

// finalize deletes the team on the server, then releases the object.
func (r *TeamReconciler) finalize(ctx context.Context, team *TerdutTeam) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(team, teamFinalizer) {
		return ctrl.Result{}, nil
	}
	if id := team.Status.TeamID; id != nil {
		api, reason, _ := r.access(ctx, team.Namespace, team.Spec.ServerRef)
		if reason == "" {
			if _, err := api.call(ctx, http.MethodDelete, teamPath(*id), nil, nil); err != nil && !isStatus(err, http.StatusNotFound) {
				return ctrl.Result{}, err
			}
		}
	}
	patch := client.MergeFrom(team.DeepCopy())
	controllerutil.RemoveFinalizer(team, teamFinalizer)
	return ctrl.Result{}, client.IgnoreNotFound(r.Patch(ctx, team, patch))
}

// desired is the spec in wire types.
type desired struct {
	ExternalID string
	Name       string
	Oidc       apiGroups
	Ladder     *apiLadder
	Switches   []apiSwitch
}

func seconds(field, d string) (int64, error) {
	v, err := time.ParseDuration(d)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", field, err)
	}
	if v < time.Second {
		return 0, fmt.Errorf("%s is %s; a timeout must be at least 1s", field, d)
	}
	return int64(v / time.Second), nil
}

func desiredTeam(team *TerdutTeam) (desired, error) {
	d := desired{
		ExternalID: externalID(team.Namespace, team.Name),
		Name:       team.Spec.DisplayName,
		Oidc:       apiGroups{MemberGroup: team.Spec.Oidc.MemberGroup, OwnerGroup: team.Spec.Oidc.OwnerGroup},
	}
	if e := team.Spec.Escalation; e != nil {
		l := &apiLadder{RepeatCount: e.RepeatCount, FallbackTopic: e.FallbackTopic}
		for i, level := range e.Levels {
			s, err := seconds(fmt.Sprintf("spec.escalation.levels[%d].timeout", i), level.Timeout)
			if err != nil {
				return d, err
			}
			out := apiLevel{TimeoutSeconds: s}
			for _, t := range level.Targets {
				out.Targets = append(out.Targets, apiTarget{Kind: t.Kind, Username: t.Username})
			}
			l.Levels = append(l.Levels, out)
		}
		d.Ladder = l
	}
	for i, sw := range team.Spec.DeadmanSwitches {
		s, err := seconds(fmt.Sprintf("spec.deadmanSwitches[%d].timeout", i), sw.Timeout)
		if err != nil {
			return d, err
		}
		sev := sw.Severity
		if sev == "" {
			sev = "critical"
		}
		d.Switches = append(d.Switches, apiSwitch{Name: sw.Name, Matcher: sw.Matcher, TimeoutSeconds: s, Severity: sev})
	}
	return d, nil
}
