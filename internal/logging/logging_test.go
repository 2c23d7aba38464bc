package logging

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"
)

func TestCapped(t *testing.T) {
	tests := []struct {
		level int
		want  bool
	}{
		{0, true},
		{MaxVerbosity, true},
		{MaxVerbosity + 1, false},
		{8, false}, // client-go's request and response bodies
	}
	for _, tt := range tests {
		var lines []string
		logger := Capped(funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 10}))
		logger.WithName("n").WithValues("k", "v").V(tt.level).Info("message")
		if got := len(lines) == 1; got != tt.want {
			t.Errorf("V(%d): logged=%t, want %t", tt.level, got, tt.want)
		}
		if enabled := logger.V(tt.level).Enabled(); enabled != tt.want {
			t.Errorf("V(%d).Enabled()=%t, want %t", tt.level, enabled, tt.want)
		}
	}
}

// The caller a capped logger reports is the caller of Info, not the cap.
func TestCappedKeepsTheCaller(t *testing.T) {
	var got string
	logger := Capped(funcr.New(func(_, args string) { got = args }, funcr.Options{LogCaller: funcr.All}))
	logger.Info("here")
	if !strings.Contains(got, "logging_test.go") {
		t.Fatalf("a capped logger reported %s, want this file as the caller", got)
	}
	logger.WithCallDepth(0).Info("again")
	if !strings.Contains(got, "logging_test.go") {
		t.Fatalf("WithCallDepth(0) reported %s, want this file as the caller", got)
	}
}

func TestIntoContext(t *testing.T) {
	var lines []string
	verbose := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 10})
	ctx := IntoContext(klog.NewContext(context.Background(), verbose))
	logger := klog.FromContext(ctx)
	logger.V(8).Info("a response body")
	logger.V(MaxVerbosity).Info("fine")
	if len(lines) != 1 {
		t.Fatalf("a client-go call with the context would log %d lines (%v), want only the V(%d) one", len(lines), lines, MaxVerbosity)
	}
	// Without a logger in the context, klog's fallback is capped as well.
	if klog.FromContext(IntoContext(context.Background())).V(8).Enabled() {
		t.Fatal("V(8) enabled in a context that had no logger")
	}
	if Capped(logr.Logger{}).GetSink() != nil {
		t.Fatal("capping the zero logger made a sink")
	}
}
