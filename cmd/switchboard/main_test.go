package main

import (
	"io"
	"testing"

	"github.com/spf13/pflag"

	"github.com/switchboard-dev/switchboard/internal/logging"
)

// Every long-running command takes the zap flags, and the logger they build is capped: even
// --zap-log-level=10 does not let client-go log a Secret's body (V(8)).
func TestLoggerIsCappedWhateverTheLevel(t *testing.T) {
	for _, cmd := range newRootCommand().Commands() {
		// version only prints the build: it logs nothing.
		if cmd.Name() == "dev" || cmd.Name() == "help" || cmd.Name() == "completion" || cmd.Name() == "version" {
			continue
		}
		if cmd.Flags().Lookup("zap-log-level") == nil {
			t.Errorf("switchboard %s has no --zap-log-level: its logger is not built by bindLogFlags", cmd.Name())
		}
	}
	f := pflag.NewFlagSet("test", pflag.ContinueOnError)
	newLogger := bindLogFlags(f)
	if err := f.Parse([]string{"--zap-log-level=10"}); err != nil {
		t.Fatal(err)
	}
	logger := newLogger(io.Discard)
	if !logger.V(logging.MaxVerbosity).Enabled() || logger.V(8).Enabled() {
		t.Fatalf("with --zap-log-level=10: V(%d) enabled=%t, V(8) enabled=%t; want true, false",
			logging.MaxVerbosity, logger.V(logging.MaxVerbosity).Enabled(), logger.V(8).Enabled())
	}
}
