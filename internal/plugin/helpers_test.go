package plugin

// Helpers of the unit tests, in a file of its own so that `make test-unit` (the build tag unit,
// which leaves out the tests that need a control plane) builds them too.

import (
	"io"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// streams are the plugin's standard streams: in as its input, out and errOut as its output.
func streams(out, errOut io.Writer, in string) genericiooptions.IOStreams {
	return genericiooptions.IOStreams{In: strings.NewReader(in), Out: out, ErrOut: errOut}
}

// result is what one run of the plugin produced.
type result struct {
	stdout, stderr string
	code           int
}

// mustFail fails the test unless r exited non-zero with one line on stderr containing want.
func mustFail(t *testing.T, r result, want string) {
	t.Helper()
	if r.code == 0 {
		t.Fatalf("succeeded, want a failure with %q\nstdout: %s\nstderr: %s", want, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, want) {
		t.Fatalf("stderr %q lacks %q", r.stderr, want)
	}
	if lines := strings.Count(strings.TrimRight(r.stderr, "\n"), "\n") + 1; lines != 1 {
		t.Fatalf("want one line on stderr, got %d: %q", lines, r.stderr)
	}
}
