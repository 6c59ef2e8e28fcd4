package replica

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// slogLogger lets raft (which logs through hclog) write to a *slog.Logger: the project
// logs with log/slog, and one node's raft messages then carry the node's attributes.
// Levels map one to one (hclog's Trace becomes slog.LevelDebug-4); hclog's key-value
// arguments are slog's. SetLevel and the level queries follow the slog handler's Enabled.
type slogLogger struct {
	l       *slog.Logger // with the implied arguments, without the name
	name    string       // written as the "logger" attribute
	implied []any
}

var _ hclog.Logger = (*slogLogger)(nil)

// levelTrace is hclog's Trace in slog's scale, below Debug.
const levelTrace = slog.LevelDebug - 4

func newSlogLogger(l *slog.Logger) *slogLogger { return &slogLogger{l: l} }

func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return levelTrace
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func (s *slogLogger) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	if s.name != "" {
		args = append([]any{"logger", s.name}, args...)
	}
	s.l.Log(context.Background(), slogLevel(level), msg, args...)
}

func (s *slogLogger) Trace(msg string, args ...any) { s.Log(hclog.Trace, msg, args...) }
func (s *slogLogger) Debug(msg string, args ...any) { s.Log(hclog.Debug, msg, args...) }
func (s *slogLogger) Info(msg string, args ...any)  { s.Log(hclog.Info, msg, args...) }
func (s *slogLogger) Warn(msg string, args ...any)  { s.Log(hclog.Warn, msg, args...) }
func (s *slogLogger) Error(msg string, args ...any) { s.Log(hclog.Error, msg, args...) }

func (s *slogLogger) enabled(l slog.Level) bool { return s.l.Enabled(context.Background(), l) }
func (s *slogLogger) IsTrace() bool             { return s.enabled(levelTrace) }
func (s *slogLogger) IsDebug() bool             { return s.enabled(slog.LevelDebug) }
func (s *slogLogger) IsInfo() bool              { return s.enabled(slog.LevelInfo) }
func (s *slogLogger) IsWarn() bool              { return s.enabled(slog.LevelWarn) }
func (s *slogLogger) IsError() bool             { return s.enabled(slog.LevelError) }

func (s *slogLogger) ImpliedArgs() []any { return s.implied }

func (s *slogLogger) With(args ...any) hclog.Logger {
	return &slogLogger{l: s.l.With(args...), name: s.name, implied: append(append([]any(nil), s.implied...), args...)}
}

func (s *slogLogger) Name() string { return s.name }

func (s *slogLogger) Named(name string) hclog.Logger {
	if s.name != "" {
		name = s.name + "." + name
	}
	return s.ResetNamed(name)
}

func (s *slogLogger) ResetNamed(name string) hclog.Logger {
	return &slogLogger{l: s.l, name: name, implied: s.implied}
}

// SetLevel does nothing: the slog handler decides what is written.
func (s *slogLogger) SetLevel(hclog.Level) {}

func (s *slogLogger) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if s.enabled(slogLevel(l)) {
			return l
		}
	}
	return hclog.Off
}

func (s *slogLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return slog.NewLogLogger(s.l.Handler(), slog.LevelInfo)
}

func (s *slogLogger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return s.StandardLogger(opts).Writer()
}
