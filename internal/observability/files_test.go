package observability

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"
)

const (
	dashboardFile = "../../examples/grafana/baremesh-control-plane.json"
	rulesDir      = "../../examples/prometheus"
	rulesFile     = "baremesh-alerts.yaml"
	rulesTestFile = "baremesh-alerts_test.yaml"
)

// promtool finds Debian's promtool (package prometheus, installed by
// hack/deps.d/60-observability.sh) or skips, saying why.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not found: install Debian's prometheus package (hack/test-deps.sh does, as root)")
	}
	return p
}

// dashboard is the part of Grafana's dashboard model the tests read.
type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// dashboardExprs are the dashboard's queries, "panel title/refId" -> expr.
func dashboardExprs(d dashboard) map[string]string {
	out := map[string]string{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out[p.Title+"/"+tg.RefID] = tg.Expr
		}
	}
	return out
}

// ruleExprs are the alert rules' expressions, alert name -> expr.
func ruleExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rulesDir, rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	out := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r.Expr
		}
	}
	return out
}

// metricRE matches the names of the metrics baremeshd exposes (its own,
// and client_golang's process and Go collectors) in a PromQL expression.
var metricRE = regexp.MustCompile(`\b(baremesh_[a-z0-9_]+|process_[a-z0-9_]+|go_[a-z0-9_]+)\b`)

// metricNames are the metric names exprs use, sorted, without duplicates.
func metricNames(exprs map[string]string) []string {
	var out []string
	for _, e := range exprs {
		for _, m := range metricRE.FindAllString(e, -1) {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	slices.Sort(out)
	return out
}
