package identity

import (
	"errors"
	"testing"
)

func TestParseID(t *testing.T) {
	good := ID{TrustDomain: "cluster.local", Namespace: "bar", ServiceAccount: "vm-sa"}
	if got, err := ParseID(good.String()); err != nil || got != good {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if s := good.URL().String(); s != "spiffe://cluster.local/ns/bar/sa/vm-sa" {
		t.Fatalf("URL %s", s)
	}
	for _, bad := range []string{
		"", "spiffe://", "https://cluster.local/ns/a/sa/b", "spiffe://cluster.local/ns/a",
		"spiffe://cluster.local/ns//sa/b", "spiffe://cluster.local/ns/a/sa/b/c", "spiffe://cluster.local/sa/a/ns/b",
		"spiffe://Cluster.local/ns/a/sa/b", "spiffe://cluster.local:80/ns/a/sa/b", "spiffe://u@cluster.local/ns/a/sa/b",
		"spiffe://cluster.local/ns/a/sa/b?x=1", "spiffe://cluster.local/ns/a.b/sa/c", "spiffe://cluster.local/ns/-a/sa/c",
		"%zz",
	} {
		if _, err := ParseID(bad); !errors.Is(err, ErrBadSPIFFEID) {
			t.Errorf("ParseID(%q) = %v, want ErrBadSPIFFEID", bad, err)
		}
	}
}
