package deploy_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type panel struct {
	ID          int    `json:"id"`
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	GridPos     struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Datasource map[string]string `json:"datasource"`
	Targets    []struct {
		RefID        string            `json:"refId"`
		Expr         string            `json:"expr"`
		LegendFormat string            `json:"legendFormat"`
		Datasource   map[string]string `json:"datasource"`
	} `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
}

type grafanaDashboard struct {
	UID           string `json:"uid"`
	Title         string `json:"title"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Query      any    `json:"query"`
			Multi      bool   `json:"multi"`
			IncludeAll bool   `json:"includeAll"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

// The dashboard: valid JSON Grafana imports (uid, schema version, panels
// that tile the 24-column grid without overlapping), templated by data
// source, job and instance, every query on the data source variable and
// parsed by promtool, every variable it uses defined, and a panel for each
// view the issue asks for.
func TestDashboard(t *testing.T) {
	raw, err := os.ReadFile(dashboard)
	require.NoError(t, err)
	var d grafanaDashboard
	require.NoError(t, json.Unmarshal(raw, &d))
	require.NotEmpty(t, d.UID)
	require.LessOrEqual(t, len(d.UID), 40, "Grafana's uid limit")
	require.GreaterOrEqual(t, d.SchemaVersion, 36, "data source references by uid")

	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Name == "job" || v.Name == "instance" {
			require.Equal(t, "query", v.Type)
			require.True(t, v.Multi && v.IncludeAll, "%s: several or all", v.Name)
		}
	}
	for _, v := range []string{"datasource", "job", "instance"} {
		require.True(t, vars[v], "templated by %s", v)
	}

	ids := map[int]bool{}
	var exprs, titles []string
	used := regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)
	type cell struct{ x, y int }
	grid := map[cell]string{}
	for _, p := range d.Panels {
		require.False(t, ids[p.ID], "panel id %d twice", p.ID)
		ids[p.ID] = true
		require.Positive(t, p.GridPos.W, p.Title)
		require.LessOrEqual(t, p.GridPos.X+p.GridPos.W, 24, "%s: past the grid's 24 columns", p.Title)
		for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
			for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
				require.NotContains(t, grid, cell{x, y}, "%s overlaps %s", p.Title, grid[cell{x, y}])
				grid[cell{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		titles = append(titles, p.Title)
		require.Contains(t, []string{"timeseries", "state-timeline", "stat"}, p.Type, p.Title)
		require.NotEmpty(t, p.Description, p.Title)
		require.Equal(t, map[string]string{"type": "prometheus", "uid": "${datasource}"}, p.Datasource, p.Title)
		require.NotEmpty(t, p.Targets, p.Title)
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			require.NotEmpty(t, tg.Expr, p.Title)
			require.False(t, refs[tg.RefID], "%s: refId %s twice", p.Title, tg.RefID)
			refs[tg.RefID] = true
			require.Equal(t, p.Datasource, tg.Datasource, p.Title)
			for _, m := range used.FindAllStringSubmatch(tg.Expr, -1) {
				require.True(t, vars[m[1]] || strings.HasPrefix(m[1], "__"), "%s: $%s is not a variable of the dashboard", p.Title, m[1])
			}
			if !strings.Contains(tg.Expr, `queue_messages`) {
				require.Contains(t, tg.Expr, `job=~"$job",instance=~"$instance"`, "%s: filtered by the variables", p.Title)
			} else {
				require.Contains(t, tg.Expr, `job=~"$job"`, "%s: queue depths are the same on every instance: by job", p.Title)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, want := range []string{"Throughput by outcome", "Failures by code", "Processing latency", "Commit latency", "In flight vs concurrency limit",
		"Database health", "Parked messages", "Queue depth", "Message age at receipt", "DLQ depth", "Throttles and conflicts", "Health probes and transitions"} {
		require.Contains(t, titles, want)
	}
	for _, e := range exprs {
		if strings.Contains(e, "_bucket") {
			require.Contains(t, e, "histogram_quantile", "a histogram is read as quantiles")
		}
	}
	checkPromQL(t, exprs)
}
