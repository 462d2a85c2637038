package deploy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/expr-lang/expr"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// scaledObject's documents.
func loadScaledObject(t *testing.T) (auth, so map[string]any) {
	t.Helper()
	raw, err := os.ReadFile(scaledObject)
	require.NoError(t, err)
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		require.Equal(t, "keda.sh/v1alpha1", doc["apiVersion"])
		switch doc["kind"] {
		case "ScaledObject":
			so = doc
		case "TriggerAuthentication":
			auth = doc
		default:
			t.Fatalf("unexpected kind %v", doc["kind"])
		}
	}
	require.NotNil(t, so)
	require.NotNil(t, auth)
	return auth, so
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sub(t *testing.T, m map[string]any, key string) map[string]any {
	t.Helper()
	v, ok := m[key].(map[string]any)
	require.True(t, ok, "%s is not a mapping: %v", key, m[key])
	return v
}

// The KEDA ScaledObject: only the fields KEDA's ScaledObject specification
// defines (2.17), scaling on the SQS queue (aws-sqs-queue) with the
// database's capacity (prometheus) composed by a formula whose every name is
// a trigger's; metadata values are strings (KEDA's metadata is a string
// map); the formula compiles as KEDA compiles it; its queries parse and
// name ddbworker_database_capacity.
func TestScaledObject(t *testing.T) {
	auth, so := loadScaledObject(t)
	require.Equal(t, map[string]any{"provider": "aws"}, sub(t, sub(t, auth, "spec"), "podIdentity"))
	spec := sub(t, so, "spec")
	for _, k := range keys(spec) {
		require.Contains(t, []string{"scaleTargetRef", "pollingInterval", "cooldownPeriod", "initialCooldownPeriod", "idleReplicaCount",
			"minReplicaCount", "maxReplicaCount", "fallback", "advanced", "triggers"}, k, "spec.%s", k)
	}
	require.NotEmpty(t, sub(t, spec, "scaleTargetRef")["name"])
	require.GreaterOrEqual(t, spec["minReplicaCount"], 1, "never 0: no replica, no capacity reported")
	fallback := sub(t, spec, "fallback")
	require.ElementsMatch(t, []string{"behavior", "failureThreshold", "replicas"}, keys(fallback))
	require.Equal(t, "currentReplicas", fallback["behavior"], "Prometheus unreadable: hold")
	advanced := sub(t, spec, "advanced")
	for _, k := range keys(advanced) {
		require.Contains(t, []string{"restoreToOriginalReplicaCount", "horizontalPodAutoscalerConfig", "scalingModifiers"}, k, "advanced.%s", k)
	}
	mods := sub(t, advanced, "scalingModifiers")
	for _, k := range keys(mods) {
		require.Contains(t, []string{"target", "activationTarget", "metricType", "formula"}, k, "scalingModifiers.%s", k)
	}
	require.Equal(t, "AverageValue", mods["metricType"])
	target, ok := mods["target"].(string)
	require.True(t, ok, "target is a string")

	triggers := map[string]map[string]any{}
	types := map[string]string{}
	for _, raw := range spec["triggers"].([]any) {
		tr := raw.(map[string]any)
		for _, k := range keys(tr) {
			require.Contains(t, []string{"type", "name", "metadata", "useCachedMetrics", "authenticationRef", "metricType"}, k, "a trigger's %s", k)
		}
		name, _ := tr["name"].(string)
		require.NotEmpty(t, name, "every trigger of a formula has a name")
		md := sub(t, tr, "metadata")
		for k, v := range md {
			_, isString := v.(string)
			require.True(t, isString, "%s: metadata %s must be a string (quote it): %v", name, k, v)
		}
		triggers[name], types[name] = md, tr["type"].(string)
		switch tr["type"] {
		case "aws-sqs-queue":
			for _, k := range keys(md) {
				require.Contains(t, []string{"queueURL", "queueURLFromEnv", "queueLength", "activationQueueLength", "scaleOnInFlight", "scaleOnDelayed",
					"awsRegion", "awsEndpoint"}, k, "aws-sqs-queue metadata %s", k)
			}
			require.NotEmpty(t, md["queueURL"])
			require.NotEmpty(t, md["awsRegion"])
			require.Equal(t, target, md["queueLength"], "the backlog one replica faces: the formula's target too")
			require.Equal(t, map[string]any{"name": sub(t, auth, "metadata")["name"]}, tr["authenticationRef"])
		case "prometheus":
			for _, k := range []string{"serverAddress", "query", "threshold"} {
				require.NotEmpty(t, md[k], "%s: prometheus %s is required", name, k)
			}
			require.Contains(t, md["query"], "ddbworker_database_capacity")
		default:
			t.Fatalf("trigger %s: unexpected type %v", name, tr["type"])
		}
	}
	require.Equal(t, "aws-sqs-queue", types["backlog"])
	require.Equal(t, "prometheus", types["capacity"])
	require.Equal(t, "prometheus", types["workers"])
	checkPromQL(t, []string{triggers["capacity"]["query"].(string), triggers["workers"]["query"].(string)})

	// Every name of the formula is a trigger's or a function of expr's.
	formula := mods["formula"].(string)
	for _, id := range regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`).FindAllString(formula, -1) {
		if id != "min" && id != "max" && id != "ceil" && id != "floor" {
			require.Contains(t, triggers, id, "formula names %s", id)
		}
	}
}

// desired is the replica count KEDA's HPA settles on for the formula at
// these trigger values: the formula compiled as KEDA compiles it (cast to
// float, the trigger names its environment), the composite metric divided
// by the target (AverageValue), rounded up, within the replica bounds.
func desired(t *testing.T, values map[string]float64) int {
	t.Helper()
	_, so := loadScaledObject(t)
	spec := sub(t, so, "spec")
	mods := sub(t, sub(t, spec, "advanced"), "scalingModifiers")
	program, err := expr.Compile("float("+mods["formula"].(string)+")", expr.Env(values), expr.AsFloat64())
	require.NoError(t, err)
	v, err := expr.Run(program, values)
	require.NoError(t, err)
	var target float64
	_, err = fmt.Sscan(mods["target"].(string), &target)
	require.NoError(t, err)
	n := int(v.(float64) / target)
	if float64(n)*target < v.(float64) {
		n++
	}
	return min(max(n, spec["minReplicaCount"].(int)), spec["maxReplicaCount"].(int))
}

// The formula's cases: the backlog scales the fleet while the database
// takes what the fleet gives it; a database that throttles, fails or
// holds the budget stops the growth where the fleet is — the backlog can
// still shrink it — and a fleet that reports nothing yet gets one replica.
func TestScaledObjectStopsAtTheDatabase(t *testing.T) {
	const perReplica = 16 // --concurrency
	for _, tc := range []struct {
		name               string
		backlog, workers   float64
		capacityPerReplica float64
		want               int
	}{
		{"a healthy table takes the backlog: 50 replicas", 5000, 10, perReplica, 50},
		{"a healthy table, a small backlog: the fleet shrinks", 300, 10, perReplica, 3},
		{"above 90% of the configured concurrency: still healthy", 5000, 10, 15, 50},
		{"throttling halved the limits: hold at 10, whatever the backlog", 1e6, 10, perReplica / 2, 10},
		{"the health gate holds everywhere: hold at 10", 1e6, 10, 0, 10},
		{"the health gate holds, the backlog is small: shrink by backlog", 300, 10, 0, 3},
		{"the write budget binds: hold", 1e6, 4, 6, 4},
		{"no replica reports yet: one", 1e6, 0, 0, 1},
		{"the ceiling", 1e7, 10, perReplica, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := desired(t, map[string]float64{"backlog": tc.backlog, "workers": tc.workers, "capacity": tc.workers * tc.capacityPerReplica})
			require.Equal(t, tc.want, got)
		})
	}
}
