package deploy_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/ddbworker/ddbworker/internal/testenv"
)

const (
	rulesFile    = "prometheus/ddbworker-alerts.yaml"
	rulesTests   = "prometheus/tests"
	dashboard    = "grafana/ddbworker.json"
	scaledObject = "keda/scaledobject.yaml"
	runbooks     = "../docs/runbooks.md"
	runbooksURL  = "https://github.com/ddbworker/ddbworker/blob/main/docs/runbooks.md#"
)

// promtool runs promtool with args and returns its output and error.
func promtool(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(testenv.Promtool(t), args...).CombinedOutput()
	return string(out), err
}

// checkPromQL has promtool parse every expression (as recording rules),
// with Grafana's variables given values.
func checkPromQL(t *testing.T, exprs []string) {
	t.Helper()
	vars := regexp.MustCompile(`\$\{?(__rate_interval|__interval|__range)\}?|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?`)
	type rec struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rec
	for i, e := range exprs {
		e = vars.ReplaceAllStringFunc(e, func(v string) string {
			if strings.Contains(v, "__") {
				return "5m"
			}
			return "x"
		})
		rules = append(rules, rec{Record: fmt.Sprintf("check:expr%d", i), Expr: e})
	}
	raw, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "check", "rules": rules}}})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "exprs.yaml")
	require.NoError(t, os.WriteFile(path, raw, 0o644))
	out, err := promtool(t, "check", "rules", path)
	require.NoError(t, err, "%s", out)
	require.Contains(t, out, fmt.Sprintf("SUCCESS: %d rules found", len(exprs)))
}
