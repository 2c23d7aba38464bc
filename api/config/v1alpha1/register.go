package v1alpha1

import "k8s.io/apimachinery/pkg/runtime/schema"

// GroupName is the group of switchboard's configuration files, apart from the CRDs'
// switchboard.dev so that a configuration is never mistaken for an object of the cluster.
const GroupName = "config.switchboard.dev"

// SchemeGroupVersion is the apiVersion every configuration file of this package declares.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// The kinds of this package, as a configuration file names them.
const (
	// ServerConfigurationKind is the kind of `switchboard server --config`.
	ServerConfigurationKind = "ServerConfiguration"
	// OperatorConfigurationKind is the kind of `switchboard operator --config`.
	OperatorConfigurationKind = "OperatorConfiguration"
	// PanelConfigurationKind is the kind of `switchboard panel --config`.
	PanelConfigurationKind = "PanelConfiguration"
)
