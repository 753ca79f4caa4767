package identity

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The state directory's format (issue #32 item 2). Each file that has a
// format of its own carries it (tokens.json: TokenFormat;
// workloads/entries.json: its version); the CA's files are Istio's PEM
// layout, which has no room for one, so the directory as a whole carries
// StateFormat in StateFormatFile. A replica of a release that writes a
// later format refuses to start on it (a downgrade), rather than rewrite
// what it cannot read; a directory without the file is of the releases
// before, format 1.
const (
	StateFormat     = 1
	StateFormatFile = "format.json"
)

type stateFormatFile struct {
	Format int    `json:"format"`
	Note   string `json:"note,omitempty"`
}

// CheckStateFormat refuses a state directory of a later format than
// this release's, naming it, both formats and what to do. A directory or
// file that does not exist is fine.
func CheckStateFormat(dir string) error {
	path := filepath.Join(dir, StateFormatFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("state directory format: %w", err)
	}
	var f stateFormatFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("state directory format %s: %v (restore it from a backup, or write {\"format\": %d} if the directory is of this release)", path, err, StateFormat)
	}
	if f.Format > StateFormat {
		return fmt.Errorf("state directory %s is of format %d, written by a later baremesh (this release reads format %d, %s): refusing to start rather than rewrite it; run the later release, or restore the directory from this release's backup", dir, f.Format, StateFormat, path)
	}
	return nil
}

// MarkStateFormat writes StateFormatFile in dir when it is missing or
// older (after CheckStateFormat). A directory that does not exist yet is
// left to the next start.
func MarkStateFormat(dir string) error {
	if err := CheckStateFormat(dir); err != nil {
		return err
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	path := filepath.Join(dir, StateFormatFile)
	if data, err := os.ReadFile(path); err == nil {
		var f stateFormatFile
		if json.Unmarshal(data, &f) == nil && f.Format == StateFormat {
			return nil
		}
	}
	out, _ := json.Marshal(stateFormatFile{Format: StateFormat, Note: "baremesh state directory format: a release that reads only older formats refuses to start on it"})
	if err := WriteFileAtomic(path, append(out, '\n'), 0o600); err != nil {
		return fmt.Errorf("state directory format: %w", err)
	}
	giveToOwner(path, dir)
	return nil
}
