//go:build race

package load

// raceEnabled: the race detector makes generation several times slower,
// so the heavier tests scale down under it.
const raceEnabled = true
