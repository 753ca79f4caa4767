package observability

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDashboardShape: the dashboard is templated on data source, job and
// instance; every panel queries the templated data source and fits the
// 24-column grid; ids are unique; every series selector is filtered by
// job and instance; time series have a unit.
func TestDashboardShape(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard without uid or title: %q %q", d.UID, d.Title)
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	for _, want := range []string{"datasource", "job", "instance"} {
		if !slices.Contains(vars, want) {
			t.Errorf("templating has no %q variable (has %v)", want, vars)
		}
	}
	ids := map[int]string{}
	selector := regexp.MustCompile(`\b(?:baremesh_[a-z0-9_]+|process_[a-z0-9_]+|go_[a-z0-9_]+|up)\b(\{[^}]*\})?`)
	queries := 0
	for _, p := range d.Panels {
		if prev, dup := ids[p.ID]; dup {
			t.Errorf("panel %q reuses id %d of %q", p.Title, p.ID, prev)
		}
		ids[p.ID] = p.Title
		if p.GridPos.X < 0 || p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24 columns", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not query the templated data source", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		if p.Type == "timeseries" && p.FieldConfig.Defaults.Unit == "" {
			t.Errorf("panel %q has no unit", p.Title)
		}
		for _, tg := range p.Targets {
			queries++
			for _, m := range selector.FindAllStringSubmatch(tg.Expr, -1) {
				if !strings.Contains(m[1], `job=~"$job"`) || !strings.Contains(m[1], `instance=~"$instance"`) {
					t.Errorf("panel %q: %s is not filtered by $job and $instance: %s", p.Title, m[0], tg.Expr)
				}
			}
		}
	}
	t.Logf("%d panels, %d queries", len(d.Panels), queries)
}

// TestDashboardQueriesParse hands every dashboard query, with Grafana's
// variables put in as Grafana would, to promtool as a recording rule: a
// query Prometheus cannot parse fails here, naming its panel.
func TestDashboardQueriesParse(t *testing.T) {
	pt := promtool(t)
	exprs := dashboardExprs(loadDashboard(t))
	vars := strings.NewReplacer("$__rate_interval", "1m", "$job", ".*", "$instance", ".*")
	type rule struct {
		Record string            `json:"record"`
		Expr   string            `json:"expr"`
		Labels map[string]string `json:"labels"`
	}
	var rules []rule
	keys := make([]string, 0, len(exprs))
	for k := range exprs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		rules = append(rules, rule{Record: fmt.Sprintf("dashboard:query_%d", i), Expr: vars.Replace(exprs[k]), Labels: map[string]string{"panel": k}})
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "dashboard-queries.yaml")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(pt, "check", "rules", f).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules over the dashboard's %d queries: %v\n%s", len(rules), err, out)
	}
	t.Logf("%d dashboard queries parse: %s", len(rules), strings.TrimSpace(string(out)))
}
