package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// rule is an alerting rule of the rules file.
type rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

func loadRules(t *testing.T) ruleFile {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	var rf ruleFile
	require.NoError(t, yaml.Unmarshal(raw, &rf))
	return rf
}

// rulesTest is a promtool rules test file.
type rulesTest struct {
	RuleFiles          []string `yaml:"rule_files"`
	EvaluationInterval string   `yaml:"evaluation_interval"`
	Tests              []struct {
		Name          string `yaml:"name"`
		AlertRuleTest []struct {
			EvalTime  string           `yaml:"eval_time"`
			AlertName string           `yaml:"alertname"`
			ExpAlerts []map[string]any `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// anchors are the anchors GitHub gives the headings of a Markdown file.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	out := map[string]bool{}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	for line := range strings.Lines(string(raw)) {
		h, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		h = strings.TrimSpace(strings.TrimLeft(h, "#"))
		out[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")] = true
	}
	return out
}

// The alert rules: promtool checks them and runs their tests; every alert
// the issue asks for is there, with a severity and the URL of an existing
// section of the runbooks; every alert has a test file with series that
// fire it and series that must not — and each half can fail: the firing
// tests fail when the alert never fires, the quiet ones when it always
// does.
func TestAlertRules(t *testing.T) {
	out, err := promtool(t, "check", "rules", rulesFile)
	require.NoError(t, err, "%s", out)
	t.Logf("promtool check rules:\n%s", out)
	tests, err := filepath.Glob(filepath.Join(rulesTests, "*.yaml"))
	require.NoError(t, err)
	out, err = promtool(t, append([]string{"test", "rules"}, tests...)...)
	require.NoError(t, err, "%s", out)
	t.Logf("promtool test rules:\n%s", out)

	rf := loadRules(t)
	sections := anchors(t, runbooks)
	var alerts []string
	byName := map[string]rule{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "only alerting rules: %+v", r)
			alerts = append(alerts, r.Alert)
			byName[r.Alert] = r
			require.Contains(t, []string{"critical", "warning"}, r.Labels["severity"], r.Alert)
			require.NotEmpty(t, r.Annotations["summary"], r.Alert)
			require.NotEmpty(t, r.Annotations["description"], r.Alert)
			anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], runbooksURL)
			require.True(t, ok, "%s: runbook_url %q is not a section of docs/runbooks.md", r.Alert, r.Annotations["runbook_url"])
			require.True(t, sections[anchor], "%s: docs/runbooks.md has no section #%s", r.Alert, anchor)
		}
	}
	for _, want := range []string{"DdbworkerDLQGrowing", "DdbworkerMessageAgeOverSLO", "DdbworkerDatabaseUnhealthy", "DdbworkerHashMismatch",
		"DdbworkerNoProgress", "DdbworkerRelayLagging", "DdbworkerEffectOutcomeUnknown"} {
		require.Contains(t, alerts, want)
	}
	require.Equal(t, "5m", byName["DdbworkerDatabaseUnhealthy"].For, "unhealthy for more than 5 minutes")

	// One test file per alert, each with a firing and a quiet case.
	covered := map[string]string{}
	for _, path := range tests {
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		var rt rulesTest
		require.NoError(t, yaml.Unmarshal(raw, &rt))
		require.Equal(t, []string{"../ddbworker-alerts.yaml"}, rt.RuleFiles, path)
		var fires, quiet bool
		var alert string
		for _, tc := range rt.Tests {
			for _, a := range tc.AlertRuleTest {
				require.True(t, alert == "" || alert == a.AlertName, "%s tests one alert, not %s and %s", path, alert, a.AlertName)
				alert = a.AlertName
				if len(a.ExpAlerts) > 0 {
					fires = true
				} else if strings.HasPrefix(tc.Name, "quiet") {
					quiet = true
				}
			}
		}
		require.Contains(t, alerts, alert, path)
		require.True(t, fires, "%s: no series fire %s", path, alert)
		require.True(t, quiet, "%s: no quiet case for %s", path, alert)
		require.NotContains(t, covered, alert, "%s and %s both test %s", covered[alert], path, alert)
		covered[alert] = path
	}
	for _, a := range alerts {
		require.Contains(t, covered, a, "alert %s has no test file", a)
		t.Run("mutations/"+a, func(t *testing.T) {
			testsCanFail(t, covered[a], a)
		})
	}
}

// testsCanFail runs path's firing tests against rules where alert never
// fires, and its quiet tests against rules where it always does: both must
// fail (and pass against the real rules).
func testsCanFail(t *testing.T, path, alert string) {
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	for _, half := range []struct {
		name     string
		firing   bool
		mutation string
	}{
		{"firing tests, alert never fires", true, "vector(1) < 0"},
		{"quiet tests, alert always fires", false, "vector(1)"},
	} {
		dir := t.TempDir()
		require.NoError(t, os.Mkdir(filepath.Join(dir, "tests"), 0o755))
		test := filepath.Join(dir, "tests", filepath.Base(path))
		require.NoError(t, os.WriteFile(test, keepTests(t, &doc, half.firing), 0o644))
		rules := filepath.Join(dir, "ddbworker-alerts.yaml")
		original, err := os.ReadFile(rulesFile)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(rules, original, 0o644))
		out, err := promtool(t, "test", "rules", test)
		require.NoError(t, err, "%s against the real rules:\n%s", half.name, out)
		require.NoError(t, os.WriteFile(rules, mutate(t, alert, half.mutation), 0o644))
		out, err = promtool(t, "test", "rules", test)
		require.Error(t, err, "%s: promtool passed:\n%s", half.name, out)
	}
}

// keepTests is a rules test file with only its firing tests (some alert
// expected) or only its quiet ones.
func keepTests(t *testing.T, doc *yaml.Node, firing bool) []byte {
	t.Helper()
	var v map[string]any
	require.NoError(t, doc.Decode(&v))
	var kept []any
	for _, tc := range v["tests"].([]any) {
		expects := false
		for _, a := range tc.(map[string]any)["alert_rule_test"].([]any) {
			exp, _ := a.(map[string]any)["exp_alerts"].([]any)
			expects = expects || len(exp) > 0
		}
		if expects == firing {
			kept = append(kept, tc)
		}
	}
	require.NotEmpty(t, kept)
	v["tests"] = kept
	out, err := yaml.Marshal(v)
	require.NoError(t, err)
	return out
}

// mutate is the rules file with alert's expression replaced.
func mutate(t *testing.T, alert, expression string) []byte {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &v))
	found := false
	for _, g := range v["groups"].([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			if r := r.(map[string]any); r["alert"] == alert {
				r["expr"], found = expression, true
			}
		}
	}
	require.True(t, found)
	out, err := yaml.Marshal(v)
	require.NoError(t, err)
	return out
}
