package agent

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// TestNewLogger: the log's format and level come from the config; the
// level stays live (what a reload sets).
func TestNewLogger(t *testing.T) {
	var b bytes.Buffer
	level := new(slog.LevelVar)
	log := NewLogger(LogConfig{Level: "warn", Format: "json"}, level, &b)
	log.Info("hidden")
	log.Warn("shown")
	var rec struct{ Msg string }
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil || rec.Msg != "shown" {
		t.Fatalf("json log at warn: %q (%v)", b.String(), err)
	}
	level.Set(slog.LevelInfo)
	b.Reset()
	log.Info("now shown")
	if !strings.Contains(b.String(), "now shown") {
		t.Errorf("after the level changed to info: %q", b.String())
	}
	b.Reset()
	NewLogger(LogConfig{}, level, &b).Info("x")
	if !strings.HasPrefix(b.String(), "time=") || level.Level() != slog.LevelInfo {
		t.Errorf("default: text at info, got %q at %v", b.String(), level.Level())
	}
}
