package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/config"
)

// Every flag of the four components binds into its configuration: but for --config and
// --print-config, none is left aside, where --print-config would not show it.
func TestEveryFlagBindsIntoTheConfiguration(t *testing.T) {
	for name, loose := range map[string][]string{
		"server": looseFlags(serverComponent), "operator": looseFlags(operatorComponent),
		"panel": looseFlags(panelComponent), "webhooks": looseFlags(webhooksComponent),
	} {
		if len(loose) > 0 {
			t.Errorf("switchboard %s has flags not bound into its configuration: %v", name, loose)
		}
	}
}

// looseFlags are the flags comp binds that are not carried into its configuration.
func looseFlags[T config.Object](comp component[T]) []string {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	f := newConfigFlags(fs, comp.prepare, comp.systemNamespace)
	comp.bind(f)
	var loose []string
	fs.VisitAll(func(fl *pflag.Flag) {
		if _, ok := f.carry[fl.Name]; !ok && fl.Name != "config" && fl.Name != "print-config" {
			loose = append(loose, fl.Name)
		}
	})
	if len(f.carry) < 3 {
		loose = append(loose, "(hardly any flag bound)")
	}
	return loose
}

// The flags spell values as the configuration does; their old spellings ("0" for an address
// that serves nothing, a negative bound for none, 0 for the default) keep working for one
// release, each saying what to write instead, and a bound's 0, which asked for the default
// before and means none now, says so.
func TestOldSpellingsOfFlags(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	tests := []struct {
		name  string
		cmd   func() *cobra.Command
		args  []string
		check func(out string) bool
		say   []string // in the warnings
		quiet bool     // no warning at all
	}{
		{name: "server, the configuration's spelling", cmd: serverComponent.command,
			args: []string{`--metrics-bind-address=`, "--max-connections=5", "--auth-failure-burst=3"}, quiet: true,
			check: func(out string) bool {
				c := printed(t, out, &sc{})
				return *c.MetricsBindAddress == "" && *c.MaxConnections == 5 && *c.AuthFailureLimit.Burst == 3
			}},
		{name: "server, the old spellings", cmd: serverComponent.command,
			args: []string{"--metrics-bind-address=0", "--health-probe-bind-address=0", "--max-connections=-1", "--auth-failure-rate=-1",
				"--shutdown-delay=-1s", "--auth-failure-burst=0", "--last-used-interval=0s"},
			check: func(out string) bool {
				c := printed(t, out, &sc{})
				return *c.MetricsBindAddress == "" && *c.HealthProbeBindAddress == "" && *c.MaxConnections == 0 && *c.AuthFailureLimit.Rate == 0 &&
					c.ShutdownDelay.Duration == 0 && *c.AuthFailureLimit.Burst == configv1alpha1.DefaultAuthFailureBurst &&
					c.LastUsed.Interval.Duration == configv1alpha1.DefaultLastUsedInterval
			},
			say: []string{
				`--metrics-bind-address=0 is deprecated: write --metrics-bind-address=`, `--health-probe-bind-address=0 is deprecated`,
				"--max-connections=-1 is deprecated: write --max-connections=0 for none", "--auth-failure-rate=-1 is deprecated",
				"--shutdown-delay=-1s is deprecated", "--auth-failure-burst=0 is deprecated: leave the flag out for the default (20)",
				"--last-used-interval=0s is deprecated: leave the flag out for the default (1m0s)",
			}},
		{name: "server, a bound's 0", cmd: serverComponent.command, args: []string{"--max-connections=0", "--shutdown-delay=0s"},
			check: func(out string) bool {
				c := printed(t, out, &sc{})
				return *c.MaxConnections == 0 && c.ShutdownDelay.Duration == 0
			},
			say: []string{"--max-connections=0 means none, as a configuration's 0 (before this release, 0 asked for the default, 1024)",
				"--shutdown-delay=0s means none, as a configuration's 0 (before this release, 0 asked for the default, 5s)"}},
		{name: "operator", cmd: operatorComponent.command,
			args: []string{"--webhook-bind-address=0", "--reveal-bind-address=0", "--unused-after=-1h", "--key-metrics-limit=-1", "--key-workers=0"},
			check: func(out string) bool {
				c := printed(t, out, &oc{})
				return c.Webhook.BindAddress == "" && c.Reveal.BindAddress == "" && c.UnusedAfter.Duration == 0 && *c.KeyMetricsLimit == 0 &&
					*c.KeyWorkers == configv1alpha1.DefaultKeyWorkers
			},
			say: []string{"--webhook-bind-address=0 is deprecated", "--reveal-bind-address=0 is deprecated", "--unused-after=-1h0m0s is deprecated",
				"--key-metrics-limit=-1 is deprecated", "--key-workers=0 is deprecated: leave the flag out for the default (8)"}},
		{name: "webhooks", cmd: webhooksComponent.command, args: []string{"--metrics-bind-address=0", "--health-probe-bind-address=:9000"},
			check: func(out string) bool {
				c := printed(t, out, &oc{})
				return *c.MetricsBindAddress == "" && *c.HealthProbeBindAddress == ":9000"
			},
			say: []string{"--metrics-bind-address=0 is deprecated"}},
		{name: "panel", cmd: panelComponent.command, args: []string{"--health-probe-bind-address=0", "--shutdown-delay=-1s", "--max-sessions=0"},
			check: func(out string) bool {
				c := printed(t, out, &pc{})
				return *c.HealthProbeBindAddress == "" && c.ShutdownDelay.Duration == 0 && *c.MaxSessions == configv1alpha1.DefaultMaxSessions
			},
			say: []string{"--health-probe-bind-address=0 is deprecated", "--shutdown-delay=-1s is deprecated", "--max-sessions=0 is deprecated"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := execute(t, tt.cmd(), append(tt.args, "--print-config")...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !tt.check(out) {
				t.Errorf("the effective configuration:\n%s", out)
			}
			for _, want := range tt.say {
				if !strings.Contains(out, want) {
					t.Errorf("no warning %q in:\n%s", want, out)
				}
			}
			if tt.quiet && strings.Contains(out, `"logger":"flags"`) {
				t.Errorf("warned of flags in the configuration's spelling:\n%s", out)
			}
		})
	}
}

// A flag given overrides the file's field only; a flag not given leaves it, even a field the
// flag's default would change.
func TestFlagsOverrideOnlyWhatTheyGive(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	file := writeFile(t, "apiVersion: config.switchboard.dev/v1alpha1\nkind: OperatorConfiguration\nkeyWorkers: 3\nleaderElect: false\nmetricsBindAddress: \"\"\n")
	out, err := execute(t, operatorComponent.command(), "--config", file, "--key-workers=5", "--print-config")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	c := printed(t, out, &oc{})
	if *c.KeyWorkers != 5 || *c.LeaderElect || *c.MetricsBindAddress != "" || *c.HealthProbeBindAddress != configv1alpha1.DefaultOperatorHealthProbeBindAddress {
		t.Errorf("the effective configuration:\n%s", out)
	}
}
