package agent

import (
	"io"
	"log/slog"
)

// NewLogger returns the agent's logger writing to w in c's format (text,
// or json); level is set from c.Level and stays live: give it to
// Options.Level and a reload sets it.
func NewLogger(c LogConfig, level *slog.LevelVar, w io.Writer) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(c.Level)) // validated at load; "" is info
	level.Set(l)
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
