package panel

import (
	"reflect"
	"testing"

	"github.com/go-logr/logr"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
)

// The defaulted configuration runs the panel exactly as its Options' defaults do.
func TestOptionsFromDefaultConfigAreThePanelsDefaults(t *testing.T) {
	c := &configv1alpha1.PanelConfiguration{}
	configv1alpha1.SetDefaults_PanelConfiguration(c)
	got := OptionsFromConfig(&c.PanelSettings, nil)
	got.Default()
	var want Options
	want.Default()
	got.Logger, want.Logger = logr.Discard(), logr.Discard()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("from the default configuration:\n%+v\nthe panel's defaults:\n%+v", got, want)
	}
	serve := ServeOptionsFromConfig(c)
	wantServe := ServeOptions{HealthProbeBindAddress: DefaultHealthProbeBindAddress}
	wantServe.Default()
	if serve != wantServe {
		t.Errorf("serves with %+v, want %+v", serve, wantServe)
	}
}
