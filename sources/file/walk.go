package file

import "github.com/baremesh/baremesh/sources/dirwatch"

// Walk calls file for every config file below dir (or dir itself when it
// is a config file), skipping hidden directories and not following
// symlinked directories below it, and unreadable for every directory it
// cannot list, whose files are then missing. Both the watcher (through
// its dirwatch.Watcher) and baremeshctl validate walk with it, so they
// see the same files.
func Walk(dir string, file func(path string), unreadable func(dir string, err error)) {
	dirwatch.Walk(dir, configFile, file, unreadable)
}
