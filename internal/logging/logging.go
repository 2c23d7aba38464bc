// Package logging holds the one logging rule of every switchboard process that touches
// Secrets (the operator, the server, the panel, `switchboard dev`, the plugin): nothing is
// logged above MaxVerbosity. client-go logs HTTP request and response bodies at V(8) and above
// through the contextual logger, and a Secret body holds a key's plaintext; so those levels are
// dropped whatever --zap-log-level says.
package logging

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
)

// MaxVerbosity is the highest V-level any switchboard process logs.
const MaxVerbosity = 5

// Capped returns logger without its levels above MaxVerbosity.
func Capped(logger logr.Logger) logr.Logger {
	sink := logger.GetSink()
	if sink == nil {
		return logger
	}
	if _, ok := sink.(cappedSink); ok {
		return logger
	}
	return logr.New(cappedSink{sink})
}

// SetLogger makes the capped logger controller-runtime's (ctrl.Log, and through it every
// manager's, reconcile's and client's contextual logger), and returns it.
func SetLogger(logger logr.Logger) logr.Logger {
	logger = Capped(logger)
	ctrl.SetLogger(logger)
	return logger
}

// IntoContext returns ctx with its contextual logger (klog's when it carries none) capped: the
// client-go calls made with the returned context log nothing above MaxVerbosity. For processes
// without controller-runtime's logger, such as the plugin.
func IntoContext(ctx context.Context) context.Context {
	return klog.NewContext(ctx, Capped(klog.FromContext(ctx)))
}

// cappedSink drops the messages above MaxVerbosity and passes the rest on.
type cappedSink struct{ logr.LogSink }

func (s cappedSink) Enabled(level int) bool {
	return level <= MaxVerbosity && s.LogSink.Enabled(level)
}

func (s cappedSink) Info(level int, msg string, keysAndValues ...any) {
	if level <= MaxVerbosity {
		s.LogSink.Info(level, msg, keysAndValues...)
	}
}

func (s cappedSink) WithValues(keysAndValues ...any) logr.LogSink {
	return cappedSink{s.LogSink.WithValues(keysAndValues...)}
}

func (s cappedSink) WithName(name string) logr.LogSink {
	return cappedSink{s.LogSink.WithName(name)}
}

// WithCallDepth keeps caller information right when the wrapped sink reports it. The frame
// of cappedSink itself is already skipped: logr.New initialises the wrapped sink once more,
// and sinks add the initial call depth to what they skip.
func (s cappedSink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return cappedSink{cd.WithCallDepth(depth)}
	}
	return s
}
