package server

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
)

// The defaulted configuration runs the server exactly as the command ran it before there was
// a configuration (its flags' defaults): the configuration's defaults and the Options' never
// drift apart, including those the front door's table sets.
func TestOptionsFromDefaultConfigAreTheCommandsDefaults(t *testing.T) {
	c := &configv1alpha1.ServerConfiguration{}
	configv1alpha1.SetDefaults_ServerConfiguration(c)
	got, err := OptionsFromConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	got.Default()
	want := Options{MetricsBindAddress: DefaultMetricsBindAddress, HealthProbeBindAddress: DefaultHealthProbeBindAddress, MetricsSecure: true}
	want.Default()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("from the default configuration:\n%+v\nthe command's defaults:\n%+v", got, want)
	}
}

// The configuration's "disabled" (an empty address, a 0 bound) is the Options' ("0", negative).
func TestOptionsFromConfigDisabled(t *testing.T) {
	zero := ptr.To[int32](0)
	c := &configv1alpha1.ServerConfiguration{
		MetricsBindAddress: ptr.To(""), HealthProbeBindAddress: ptr.To(""), MaxConnections: zero, MaxConnectionsPerClient: zero,
		MaxInFlightBytesPerNamespace: ptr.To[int64](0), AuthFailureLimit: configv1alpha1.AuthFailureLimit{Rate: ptr.To(0.0)},
		Authz:          configv1alpha1.Authz{HTTP: configv1alpha1.AuthzHTTP{MaxConnections: zero, MaxConnectionsPerClient: zero}},
		ShutdownDelay:  &metav1.Duration{},
		TrustedProxies: []string{"10.0.0.1"},
	}
	configv1alpha1.SetDefaults_ServerConfiguration(c)
	o, err := OptionsFromConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	if o.MetricsBindAddress != "0" || o.HealthProbeBindAddress != "0" || o.MaxConnections != -1 || o.MaxConnectionsPerClient != -1 ||
		o.MaxInFlightBytesPerNamespace != -1 || o.FailureRate != -1 || o.AuthzHTTPMaxConnections != -1 ||
		o.AuthzHTTPMaxConnectionsPerClient != -1 || o.ShutdownDelay != -1 || o.TrustedProxies[0].String() != "10.0.0.1/32" {
		t.Errorf("disabled in the configuration, in Options: %+v", o)
	}
}

// The leak reports section reaches the receiver's configuration when it listens, and not
// otherwise (the defaults of a listener that is off are no settings).
func TestOptionsFromConfigLeakReports(t *testing.T) {
	c := &configv1alpha1.ServerConfiguration{LeakReports: configv1alpha1.LeakReports{
		Listen: ":9003", MaxBatch: ptr.To[int32](10), Partner: configv1alpha1.LeakReportsPartner{Enabled: true},
		OrganizationAlerts: configv1alpha1.LeakReportsOrganizationAlerts{APIBaseURL: "https://ghe.example.com/api/v3", Organization: "acme",
			CatchUp: configv1alpha1.LeakReportsCatchUp{MaxRequests: ptr.To[int32](3)}},
		UnverifiedLimit: configv1alpha1.LeakReportsUnverifiedLimit{Burst: ptr.To[int32](5)},
	}}
	configv1alpha1.SetDefaults_ServerConfiguration(c)
	o, err := OptionsFromConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	lr := o.LeakReports
	if o.LeakReportsListen != ":9003" || !lr.Partner || lr.MaxBatch != 10 || lr.MaxBody != configv1alpha1.DefaultLeakReportsMaxBodyBytes ||
		lr.Rate != configv1alpha1.DefaultLeakReportsRate || lr.Burst != configv1alpha1.DefaultLeakReportsBurst ||
		lr.PublicKeysURL != configv1alpha1.DefaultLeakReportsPublicKeysURL || lr.APIBaseURL != "https://ghe.example.com/api/v3" {
		t.Errorf("leakReports in Options: %q %+v", o.LeakReportsListen, lr)
	}
	if lr.ClientRate != configv1alpha1.DefaultLeakReportsUnverifiedRate || lr.ClientBurst != 5 || lr.Clients != configv1alpha1.DefaultLeakReportsUnverifiedClients ||
		lr.Replays != configv1alpha1.DefaultLeakReportsReplays || lr.ReplayTTL != configv1alpha1.DefaultLeakReportsReplayTTL {
		t.Errorf("leakReports' per-client and replay bounds in Options: %+v", lr)
	}
	if cu := lr.CatchUp; cu.Organization != "acme" || cu.Period != configv1alpha1.DefaultLeakReportsCatchUpPeriod || cu.MaxCalls != 3 {
		t.Errorf("leakReports' catch-up in Options: %+v", cu)
	}
}
