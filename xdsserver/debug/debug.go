// Package debug serves the xDS server's debug pages: /debug/syncz (each
// connection's state by type), /debug/config_dump?proxy=ID (what a proxy
// was last sent) and /debug/pushz (recent pushes and what they cost).
//
// It reads the protocol package (ads) and renders; nothing imports it but
// the wiring.
package debug

import (
	"encoding/json"
	"net/http"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/baremesh/baremesh/xdsserver/ads"
)

// Source is what the pages read. *ads.Server implements it.
type Source interface {
	Syncz() []ads.ProxyStatus
	Dumps(id string) []ads.Dump
	Pushes() []ads.PushView
}

var _ Source = (*ads.Server)(nil)

// SyncHandler serves /debug/syncz.
func SyncHandler(src Source) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		st := src.Syncz()
		if st == nil {
			st = []ads.ProxyStatus{}
		}
		writeJSON(w, st)
	})
}

// ConfigDumpHandler serves /debug/config_dump?proxy=ID: what the proxy
// (every connection whose proxy ID or connection ID is ID) was last sent,
// by type.
func ConfigDumpHandler(src Source) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("proxy")
		if id == "" {
			http.Error(w, "missing ?proxy=ID (see /debug/syncz)", http.StatusBadRequest)
			return
		}
		type dump struct {
			Connection string                       `json:"connection"`
			Types      map[string][]json.RawMessage `json:"types"`
		}
		var out []dump
		for _, d := range src.Dumps(id) {
			o := dump{Connection: d.Connection, Types: map[string][]json.RawMessage{}}
			for t, res := range d.Types {
				for _, a := range res {
					b, err := protojson.Marshal(a)
					if err != nil {
						b, _ = json.Marshal(map[string]string{"error": err.Error()})
					}
					o.Types[t] = append(o.Types[t], b)
				}
			}
			for t, errs := range d.Errors {
				for _, err := range errs {
					b, _ := json.Marshal(map[string]string{"error": err.Error()})
					o.Types[t] = append(o.Types[t], b)
				}
			}
			out = append(out, o)
		}
		if out == nil {
			http.Error(w, "no connected proxy "+id, http.StatusNotFound)
			return
		}
		writeJSON(w, out)
	})
}

// PushzHandler serves /debug/pushz: the recent pushes, newest first.
func PushzHandler(src Source) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, src.Pushes())
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
