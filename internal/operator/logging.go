package operator

import "github.com/go-logr/logr"

// MaxLogVerbosity is the highest V-level the operator logs. client-go logs HTTP request and
// response bodies at V(8) and above through the contextual logger, and a Secret body holds a
// key's plaintext: those levels are dropped whatever --zap-log-level says.
const MaxLogVerbosity = 5

// capVerbosity returns logger without its levels above MaxLogVerbosity.
func capVerbosity(logger logr.Logger) logr.Logger {
	if logger.GetSink() == nil {
		return logger
	}
	return logr.New(cappedSink{logger.GetSink()})
}

// cappedSink drops the messages above MaxLogVerbosity and passes the rest on.
type cappedSink struct{ logr.LogSink }

func (s cappedSink) Enabled(level int) bool {
	return level <= MaxLogVerbosity && s.LogSink.Enabled(level)
}

func (s cappedSink) Info(level int, msg string, keysAndValues ...any) {
	if level <= MaxLogVerbosity {
		s.LogSink.Info(level, msg, keysAndValues...)
	}
}

func (s cappedSink) WithValues(keysAndValues ...any) logr.LogSink {
	return cappedSink{s.LogSink.WithValues(keysAndValues...)}
}

func (s cappedSink) WithName(name string) logr.LogSink {
	return cappedSink{s.LogSink.WithName(name)}
}

// WithCallDepth keeps caller information right when the wrapped sink reports it.
func (s cappedSink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return cappedSink{cd.WithCallDepth(depth + 1)}
	}
	return s
}
