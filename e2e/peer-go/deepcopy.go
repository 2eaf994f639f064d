package main

// DeepCopy methods as controller-gen would generate them (the cache hands out copies on every
// Get and List, so they are on the hot path: written out, not a JSON round trip).

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func copyString(p *string) *string {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func copyInt64(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func copyConditions(in []metav1.Condition) []metav1.Condition {
	if in == nil {
		return nil
	}
	out := make([]metav1.Condition, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

func (in *TerdutServer) DeepCopyInto(out *TerdutServer) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
}

func (in *TerdutServer) DeepCopy() *TerdutServer {
	if in == nil {
		return nil
	}
	out := new(TerdutServer)
	in.DeepCopyInto(out)
	return out
}

func (in *TerdutServer) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func (in *TerdutServerList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(TerdutServerList)
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]TerdutServer, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

func (in *TeamSpec) DeepCopyInto(out *TeamSpec) {
	*out = *in
	out.Oidc.MemberGroup = copyString(in.Oidc.MemberGroup)
	out.Oidc.OwnerGroup = copyString(in.Oidc.OwnerGroup)
	if in.Escalation != nil {
		e := *in.Escalation
		e.FallbackTopic = copyString(in.Escalation.FallbackTopic)
		e.Levels = make([]EscalationLevel, len(in.Escalation.Levels))
		for i, l := range in.Escalation.Levels {
			e.Levels[i] = EscalationLevel{Timeout: l.Timeout, Targets: make([]EscalationTarget, len(l.Targets))}
			for j, t := range l.Targets {
				e.Levels[i].Targets[j] = EscalationTarget{Kind: t.Kind, Username: copyString(t.Username)}
			}
		}
		out.Escalation = &e
	}
	if in.DeadmanSwitches != nil {
		out.DeadmanSwitches = append([]DeadmanSwitch(nil), in.DeadmanSwitches...)
	}
}

func (in *TerdutTeam) DeepCopyInto(out *TerdutTeam) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
	out.Status.Conditions = copyConditions(in.Status.Conditions)
	out.Status.ObservedGeneration = copyInt64(in.Status.ObservedGeneration)
	out.Status.TeamID = copyInt64(in.Status.TeamID)
}

func (in *TerdutTeam) DeepCopy() *TerdutTeam {
	if in == nil {
		return nil
	}
	out := new(TerdutTeam)
	in.DeepCopyInto(out)
	return out
}

func (in *TerdutTeam) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func (in *TerdutTeamList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(TerdutTeamList)
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]TerdutTeam, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

func (in *TerdutAlertSource) DeepCopyInto(out *TerdutAlertSource) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Status.Conditions = copyConditions(in.Status.Conditions)
	out.Status.ObservedGeneration = copyInt64(in.Status.ObservedGeneration)
	out.Status.IntegrationID = copyInt64(in.Status.IntegrationID)
	if in.Status.WebhookSecretRef != nil {
		r := *in.Status.WebhookSecretRef
		out.Status.WebhookSecretRef = &r
	}
}

func (in *TerdutAlertSource) DeepCopy() *TerdutAlertSource {
	if in == nil {
		return nil
	}
	out := new(TerdutAlertSource)
	in.DeepCopyInto(out)
	return out
}

func (in *TerdutAlertSource) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func (in *TerdutAlertSourceList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(TerdutAlertSourceList)
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]TerdutAlertSource, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}
