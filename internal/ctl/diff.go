package ctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/baremesh/baremesh/internal/validate"
)

// diffReport mirrors /debug/diff's answer (xdsserver/dryrun.Report).
type diffReport struct {
	Proxies []struct {
		ID    string `json:"id"`
		Conn  string `json:"connection"`
		Types []struct {
			Type  string `json:"type"`
			Added []struct {
				Name     string          `json:"name"`
				Resource json.RawMessage `json:"resource"`
			} `json:"added"`
			Removed []string `json:"removed"`
			Changed []struct {
				Name   string `json:"name"`
				Fields []struct {
					Path string `json:"path"`
					Old  string `json:"old"`
					New  string `json:"new"`
				} `json:"fields"`
			} `json:"changed"`
			Error string `json:"error"`
		} `json:"types"`
	} `json:"proxies"`
}

// diffCmd sends DIR's files to POST /debug/diff and prints, per proxy and
// type, the resources added (+), removed (-) and changed (~, with each
// changed field). Exit status as kubectl diff: 0 no difference, 1
// differences, 2 an error.
func diffCmd(e *Env, args []string) int {
	fs := e.newFlags("diff")
	proxy := fs.String("proxy", "", "only this proxy (NAME, ID or connection)")
	out := fs.String("o", "text", "output: text or json (the daemon's report)")
	pos, err := parse(fs, args)
	if err != nil {
		return exitParse(err)
	}
	if len(pos) == 0 || (*out != "text" && *out != "json") {
		fs.Usage()
		return 2
	}
	files, err := validate.Files(pos)
	if err != nil {
		fmt.Fprintln(e.Stderr, "baremeshctl:", err)
		return 2
	}
	var req struct {
		Files []map[string]string `json:"files"`
	}
	for _, f := range files {
		b, err := validate.ReadFile(f)
		if err != nil {
			fmt.Fprintln(e.Stderr, "baremeshctl:", err)
			return 2
		}
		req.Files = append(req.Files, map[string]string{"path": f, "content": string(b)})
	}
	q := url.Values{}
	if *proxy != "" {
		id, err := e.resolveProxy(*proxy)
		if err != nil {
			fmt.Fprintln(e.Stderr, "baremeshctl:", err)
			return 2
		}
		q.Set("proxy", id)
	}
	body, err := e.post("/debug/diff", q, req)
	if err != nil {
		var he *httpError
		if errors.As(err, &he) && he.code == http.StatusUnprocessableEntity {
			var p struct {
				Problems []string `json:"problems"`
			}
			if json.Unmarshal([]byte(he.msg), &p) == nil {
				fmt.Fprintf(e.Stderr, "baremeshctl diff: %s does not load (nothing compared):\n  %s\n", strings.Join(pos, ", "), strings.Join(p.Problems, "\n  "))
				return 2
			}
		}
		fmt.Fprintln(e.Stderr, "baremeshctl:", err)
		return 2
	}
	var rep diffReport
	if err := json.Unmarshal(body, &rep); err != nil {
		fmt.Fprintln(e.Stderr, "baremeshctl: unexpected answer from /debug/diff:", err)
		return 2
	}
	if *out == "json" {
		_, _ = e.Stdout.Write(body)
	}
	changed := writeDiff(e.Stdout, rep, *out == "text")
	if changed {
		return 1
	}
	return 0
}

// writeDiff prints the report (if print) and says whether anything differs.
func writeDiff(w io.Writer, rep diffReport, print bool) bool {
	p := func(format string, a ...any) {
		if print {
			fmt.Fprintf(w, format, a...)
		}
	}
	changed, n := false, 0
	for _, pd := range rep.Proxies {
		if len(pd.Types) == 0 {
			p("%s: no change\n", shortName(pd.ID))
			continue
		}
		changed, n = true, n+1
		p("%s (%s):\n", shortName(pd.ID), pd.ID)
		for _, t := range pd.Types {
			typ := strings.ToUpper(t.Type)
			if t.Error != "" {
				p("  %s  ! %s\n", typ, t.Error)
			}
			for _, a := range t.Added {
				p("  %s  + %s\n", typ, a.Name)
			}
			for _, r := range t.Removed {
				p("  %s  - %s\n", typ, r)
			}
			for _, c := range t.Changed {
				p("  %s  ~ %s\n", typ, c.Name)
				for _, f := range c.Fields {
					switch {
					case f.New == "(added)" && f.Old == "":
						p("          %s: added\n", f.Path)
					case f.Old == "(removed)" && f.New == "":
						p("          %s: removed\n", f.Path)
					default:
						p("          %s: %s -> %s\n", f.Path, orNone(f.Old), orNone(f.New))
					}
				}
			}
		}
	}
	if len(rep.Proxies) == 0 {
		p("no proxy connected: nothing to compare\n")
	} else {
		p("%d of %d connected proxies would receive different config (nothing was pushed)\n", n, len(rep.Proxies))
	}
	return changed
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// post sends v as JSON to the daemon and returns the answer's body.
func (e *Env) post(path string, q url.Values, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	u := e.url(path, q)
	resp, err := e.HTTP.Post(u, "application/json", bytes.NewReader(b))
	return e.answer(u, resp, err)
}
