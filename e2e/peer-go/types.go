package main

// The three CRDs of terdut.ryuvia.com/v1alpha1 as Go types, the fields this peer reads and
// writes. Kubebuilder would generate them (and the DeepCopy methods in deepcopy.go) from
// markers; here they are written out for the CRDs the Rust crate `terdut-crds` defines.

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var groupVersion = schema.GroupVersion{Group: "terdut.ryuvia.com", Version: "v1alpha1"}

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(groupVersion,
		&TerdutServer{}, &TerdutServerList{},
		&TerdutTeam{}, &TerdutTeamList{},
		&TerdutAlertSource{}, &TerdutAlertSourceList{},
	)
	metav1.AddToGroupVersion(s, groupVersion)
	return nil
}

// TerdutServer: only what a team's pass needs (the port its API listens on).
type TerdutServer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ServerSpec `json:"spec"`
}

type ServerSpec struct {
	Networking ServerNetworking `json:"networking"`
}

type ServerNetworking struct {
	ServicePort int32 `json:"servicePort"`
}

type TerdutServerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerdutServer `json:"items"`
}

type ObjectRef struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

type TeamOidc struct {
	MemberGroup *string `json:"memberGroup,omitempty"`
	OwnerGroup  *string `json:"ownerGroup,omitempty"`
}

type EscalationTarget struct {
	Kind     string  `json:"kind"`
	Username *string `json:"username,omitempty"`
}

type EscalationLevel struct {
	Timeout string             `json:"timeout"`
	Targets []EscalationTarget `json:"targets"`
}

type Escalation struct {
	RepeatCount   int32             `json:"repeatCount,omitempty"`
	FallbackTopic *string           `json:"fallbackTopic,omitempty"`
	Levels        []EscalationLevel `json:"levels"`
}

type DeadmanSwitch struct {
	Name     string `json:"name"`
	Matcher  string `json:"matcher"`
	Timeout  string `json:"timeout"`
	Severity string `json:"severity,omitempty"`
}

type TeamSpec struct {
	ServerRef       ObjectRef       `json:"serverRef"`
	DisplayName     string          `json:"displayName"`
	Oidc            TeamOidc        `json:"oidc,omitempty"`
	Escalation      *Escalation     `json:"escalation,omitempty"`
	DeadmanSwitches []DeadmanSwitch `json:"deadmanSwitches,omitempty"`
}

type TeamStatus struct {
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
	ObservedGeneration *int64             `json:"observedGeneration,omitempty"`
	TeamID             *int64             `json:"teamID,omitempty"`
}

type TerdutTeam struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              TeamSpec   `json:"spec"`
	Status            TeamStatus `json:"status,omitempty"`
}

type TerdutTeamList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerdutTeam `json:"items"`
}

type SourceSpec struct {
	TeamRef ObjectRef `json:"teamRef"`
	Kind    string    `json:"kind"`
	Name    string    `json:"name"`
}

type SourceStatus struct {
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
	ObservedGeneration *int64             `json:"observedGeneration,omitempty"`
	IntegrationID      *int64             `json:"integrationID,omitempty"`
	WebhookSecretRef   *ObjectRef         `json:"webhookURLSecretRef,omitempty"`
}

type TerdutAlertSource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SourceSpec   `json:"spec"`
	Status            SourceStatus `json:"status,omitempty"`
}

type TerdutAlertSourceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerdutAlertSource `json:"items"`
}
