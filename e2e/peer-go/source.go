package main

// The TerdutAlertSource controller: waits for its team's Ready and id, creates the integration
// (POST answers with the webhook URL and key, the only time the server gives them), keeps them
// in the webhook Secret `<name>-terdut-webhook` (owned by the source, so `Owns` watches it and
// garbage collection deletes it), and checks on every resync that the integration is still
// there (GET, one read) and the Secret still holds its key.

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

const (
	secretSuffix      = "-terdut-webhook"
	labelManaged      = "terdut.ryuvia.com/managed"
	labelManagedBy    = "app.kubernetes.io/managed-by"
	labelAlertSource  = "terdut.ryuvia.com/alert-source"
	annotationIntegID = "terdut.ryuvia.com/integration-id"
)

type SourceReconciler struct{ *shared }

func (r *SourceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var src TerdutAlertSource
	if err := r.Get(ctx, req.NamespacedName, &src); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !src.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &src)
	}
	if !controllerutil.ContainsFinalizer(&src, sourceFinalizer) {
		patch := client.MergeFrom(src.DeepCopy())
		controllerutil.AddFinalizer(&src, sourceFinalizer)
		if err := r.Patch(ctx, &src, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	before := src.DeepCopy()
	result, err := r.converge(ctx, &src)
	if err != nil {
		return ctrl.Result{}, err
	}
	gen := src.Generation
	src.Status.ObservedGeneration = &gen
	if !reflect.DeepEqual(before.Status, src.Status) {
		if err := r.Status().Patch(ctx, &src, client.MergeFrom(before)); err != nil {
			if apierrors.IsNotFound(err) {
				return ctrl.Result{}, nil
			}
			return ctrl.Result{}, err
		}
	}
	return result, nil
}

// teamOf is the source's team if it is Ready with an id on the server, else the reason to wait.
func (r *SourceReconciler) teamOf(ctx context.Context, src *TerdutAlertSource) (*TerdutTeam, string, string) {
	var team TerdutTeam
	name := types.NamespacedName{Namespace: src.Namespace, Name: src.Spec.TeamRef.Name}
	if err := r.Get(ctx, name, &team); err != nil {
		return nil, "TeamNotFound", fmt.Sprintf("TerdutTeam %s not found", name)
	}
	if !meta.IsStatusConditionTrue(team.Status.Conditions, "Ready") || team.Status.TeamID == nil {
		return nil, "WaitingForTeam", fmt.Sprintf("TerdutTeam %s is not Ready yet", name)
	}
	return &team, "", ""
}

func (r *SourceReconciler) converge(ctx context.Context, src *TerdutAlertSource) (ctrl.Result, error) {
	team, reason, message := r.teamOf(ctx, src)
	if reason != "" {
		setReady(&src.Status.Conditions, false, reason, message, src.Generation)
		// The team watch brings the source back when its team turns Ready.
		return r.jittered(), nil
	}
	api, reason, message := r.access(ctx, team.Namespace, team.Spec.ServerRef)
	if reason != "" {
		setReady(&src.Status.Conditions, false, reason, message, src.Generation)
		return r.jittered(), nil
	}
	teamID := *team.Status.TeamID
	secretName := src.Name + secretSuffix
	var secret corev1.Secret
	haveSecret := r.Get(ctx, types.NamespacedName{Namespace: src.Namespace, Name: secretName}, &secret) == nil

	var integ *apiIntegration
	if id := src.Status.IntegrationID; id != nil {
		var got apiIntegration
		_, err := api.call(ctx, http.MethodGet, teamPath(teamID, fmt.Sprintf("/integrations/%d", *id)), nil, &got)
		switch {
		case err == nil:
			integ = &got
		case !isStatus(err, http.StatusNotFound):
			return ctrl.Result{}, err
		}
	}
	if integ == nil {
		var created apiIntegration
		code, err := api.call(ctx, http.MethodPost, teamPath(teamID, "/integrations"), map[string]string{
			"kind": src.Spec.Kind, "name": src.Spec.Name, "external_id": externalID(src.Namespace, src.Name),
		}, &created)
		if err != nil {
			return ctrl.Result{}, err
		}
		integ = &created
		if code == http.StatusCreated {
			if err := r.writeSecret(ctx, src, secretName, &created); err != nil {
				return ctrl.Result{}, err
			}
			haveSecret = true
			secret.Annotations = map[string]string{annotationIntegID: strconv.FormatInt(created.ID, 10)}
			r.events.Eventf(src, nil, corev1.EventTypeNormal, "IntegrationCreated", "CreateIntegration",
				"created integration %d on team %d; its webhook is in Secret %s", created.ID, teamID, secretName)
		}
	}
	id := integ.ID
	src.Status.IntegrationID = &id
	if !haveSecret || secret.Annotations[annotationIntegID] != strconv.FormatInt(id, 10) {
		setReady(&src.Status.Conditions, false, "WebhookSecretLost",
			fmt.Sprintf("Secret %s does not hold the key of integration %d", secretName, id), src.Generation)
		return r.jittered(), nil
	}
	if integ.Name != src.Spec.Name {
		if _, err := api.call(ctx, http.MethodPatch, teamPath(teamID, fmt.Sprintf("/integrations/%d", id)),
			map[string]string{"name": src.Spec.Name}, nil); err != nil {
			return ctrl.Result{}, err
		}
		r.events.Eventf(src, nil, corev1.EventTypeNormal, "IntegrationRenamed", "RenameIntegration",
			"renamed integration %d to %q", id, src.Spec.Name)
	}
	src.Status.WebhookSecretRef = &ObjectRef{Name: secretName}
	setReady(&src.Status.Conditions, true, "Ready",
		fmt.Sprintf("integration %d on team %d; webhook in Secret %s", id, teamID, secretName), src.Generation)
	return r.jittered(), nil
}

// writeSecret creates (or replaces) the webhook Secret, owned by the source.
func (r *SourceReconciler) writeSecret(ctx context.Context, src *TerdutAlertSource, name string, integ *apiIntegration) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: src.Namespace}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, secret, func() error {
		label := src.Name
		if len(label) > 63 {
			label = label[:63]
		}
		secret.Labels = map[string]string{labelManaged: "true", labelManagedBy: "terdut-operator", labelAlertSource: label}
		secret.Annotations = map[string]string{annotationIntegID: strconv.FormatInt(integ.ID, 10)}
		secret.Type = corev1.SecretTypeOpaque
		secret.Data = map[string][]byte{"url": []byte(integ.URL), "key": []byte(integ.Key)}
		return controllerutil.SetControllerReference(src, secret, r.Scheme())
	})
	return err
}

func (r *SourceReconciler) finalize(ctx context.Context, src *TerdutAlertSource) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(src, sourceFinalizer) {
		return ctrl.Result{}, nil
	}
	if id := src.Status.IntegrationID; id != nil {
		var team TerdutTeam
		if err := r.Get(ctx, types.NamespacedName{Namespace: src.Namespace, Name: src.Spec.TeamRef.Name}, &team); err == nil && team.Status.TeamID != nil {
			if api, reason, _ := r.access(ctx, team.Namespace, team.Spec.ServerRef); reason == "" {
				path := teamPath(*team.Status.TeamID, fmt.Sprintf("/integrations/%d", *id))
				if _, err := api.call(ctx, http.MethodDelete, path, nil, nil); err != nil && !isStatus(err, http.StatusNotFound) {
					return ctrl.Result{}, err
				}
			}
		}
	}
	patch := client.MergeFrom(src.DeepCopy())
	controllerutil.RemoveFinalizer(src, sourceFinalizer)
	return ctrl.Result{}, client.IgnoreNotFound(r.Patch(ctx, src, patch))
}
