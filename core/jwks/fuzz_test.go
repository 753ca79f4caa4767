package jwks_test

import (
	"testing"

	"github.com/baremesh/baremesh/core/jwks"
)

// FuzzCheck: Check reads bodies from any jwksUri; it must not panic,
// and what it accepts has a "keys" array.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{keyA, `{"keys":[]}`, `{"keys":null}`, `{"keys":{}}`, `[]`, ``, `{"keys":[1,"x",{}]}`, jwks.PublicOnly} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if jwks.Check(b) == nil && len(b) < 2 {
			t.Fatalf("accepted %q", b)
		}
	})
}
