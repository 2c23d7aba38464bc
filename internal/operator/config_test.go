package operator

import (
	"reflect"
	"testing"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	apikeyctrl "github.com/switchboard-dev/switchboard/internal/controller/apikey"
	"github.com/switchboard-dev/switchboard/internal/renewalinterval"
)

// The defaulted configuration runs the operator exactly as the command ran it before there
// was a configuration (its flags' defaults), the controllers' and renewal floor's included.
func TestOptionsFromDefaultConfigAreTheCommandsDefaults(t *testing.T) {
	c := &configv1alpha1.OperatorConfiguration{}
	configv1alpha1.SetDefaults_OperatorConfiguration(c)
	got := OptionsFromConfig(c)
	got.Default()
	want := Options{MetricsBindAddress: DefaultMetricsBindAddress, HealthProbeBindAddress: DefaultHealthProbeBindAddress,
		MetricsSecure: true, LeaderElection: true}
	want.Default()
	got.Logger, want.Logger = logr.Discard(), logr.Discard()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("from the default configuration:\n%+v\nthe command's defaults:\n%+v", got, want)
	}
	if apikeyctrl.DefaultExpiryWarning != configv1alpha1.DefaultExpiryWarning || apikeyctrl.DefaultUnusedAfter != configv1alpha1.DefaultUnusedAfter ||
		renewalinterval.Default.Floor != configv1alpha1.DefaultMinRenewalInterval || renewalinterval.Default.Percentage != configv1alpha1.DefaultMinRenewalIntervalPercentage {
		t.Error("the controllers' defaults differ from the configuration's")
	}
}

// The configuration's "disabled" (an empty address, a 0 period or bound) is the Options' ("0",
// negative).
func TestOptionsFromConfigDisabled(t *testing.T) {
	c := &configv1alpha1.OperatorConfiguration{MetricsBindAddress: ptr.To(""), UnusedAfter: &metav1.Duration{}, MinRenewalInterval: &metav1.Duration{},
		MinRenewalIntervalPercentage: ptr.To[int32](0), KeyMetricsLimit: ptr.To[int32](0), LeakReportRetention: &metav1.Duration{}}
	configv1alpha1.SetDefaults_OperatorConfiguration(c)
	o := OptionsFromConfig(c)
	if o.MetricsBindAddress != "0" || o.RevealBindAddress != "0" || o.WebhookBindAddress != "0" || o.UnusedAfter != -1 ||
		o.MinRenewalInterval != -1 || o.MinRenewalIntervalPercentage != -1 || o.KeyMetricsLimit != -1 || o.LeakReportRetention != -1 {
		t.Errorf("disabled in the configuration, in Options: %+v", o)
	}
}
