package observability

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAlertRules runs promtool over the shipped rules: syntax and
// templates (check rules), then every unit test (test rules), so each
// alert is shown to fire on its condition and, where the file says so, not
// on its neighbour.
func TestAlertRules(t *testing.T) {
	pt := promtool(t)
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", rulesTestFile}} {
		cmd := exec.Command(pt, args...)
		cmd.Dir = rulesDir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

// TestEveryAlertHasAUnitTest: each alert of the rules file is named by at
// least one alert_rule_test of the unit test file.
func TestEveryAlertHasAUnitTest(t *testing.T) {
	tests := readFile(t, rulesDir+"/"+rulesTestFile)
	for alert := range ruleExprs(t) {
		if !strings.Contains(tests, "alertname: "+alert+"\n") {
			t.Errorf("alert %s has no alert_rule_test in %s", alert, rulesTestFile)
		}
	}
}
