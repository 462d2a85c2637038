package emftest_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/lambda/internal/emf/emftest"
)

// The specification's own valid example passes; each rule broken on its
// own is reported.
func TestValidate(t *testing.T) {
	const example = `{"_aws":{"Timestamp":1574109732004,"CloudWatchMetrics":[{"Namespace":"lambda-function-metrics","Dimensions":[["functionVersion"]],` +
		`"Metrics":[{"Name":"time","Unit":"Milliseconds","StorageResolution":60}]}]},"functionVersion":"$LATEST","time":100,"requestId":"989ffbf8-9ace-4817-a57c-e4dd734019ee"}`
	doc, err := emftest.Validate([]byte(example))
	require.NoError(t, err)
	require.Equal(t, int64(1574109732004), doc.Timestamp)
	require.Equal(t, "lambda-function-metrics", doc.Namespace)
	require.Equal(t, [][]string{{"functionVersion"}}, doc.Dimensions)
	require.Equal(t, map[string]string{"functionVersion": "$LATEST"}, doc.Values)
	require.Equal(t, map[string][]float64{"time": {100}}, doc.Metrics)

	keys := make([]string, 31)
	for i := range keys {
		keys[i] = `"d` + strings.Repeat("x", i) + `"`
	}
	values := strings.Repeat("1,", 100) + "1"
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"not JSON", `{"_aws":`, "not a JSON object"},
		{"data after the object", example + ` trailing`, "data after the JSON object"},
		{"no _aws", `{"time":1}`, `no "_aws" object`},
		{"an extra member in _aws", strings.Replace(example, `"Timestamp"`, `"LogGroupName":"x","Timestamp"`, 1), `"LogGroupName"`},
		{"no Timestamp", strings.Replace(example, `"Timestamp":1574109732004,`, ``, 1), "Timestamp is missing"},
		{"a Timestamp in seconds", strings.Replace(example, `1574109732004`, `1574109732`, 1), "not milliseconds"},
		{"a fractional Timestamp", strings.Replace(example, `1574109732004`, `1574109732004.5`, 1), "not an integer"},
		{"no directive", `{"_aws":{"Timestamp":1574109732004,"CloudWatchMetrics":[]}}`, "defines no metric"},
		{"an extra member in the directive", strings.Replace(example, `"Namespace"`, `"Region":"x","Namespace"`, 1), `"Region"`},
		{"no Namespace", strings.Replace(example, `"Namespace":"lambda-function-metrics",`, ``, 1), "Namespace is missing"},
		{"a long Namespace", strings.Replace(example, `lambda-function-metrics`, strings.Repeat("n", 256), 1), "1..255 characters"},
		{"no dimension set", strings.Replace(example, `[["functionVersion"]]`, `[]`, 1), "Dimensions is missing, not an array or empty"},
		{"31 dimensions", strings.Replace(example, `[["functionVersion"]]`, `[[`+strings.Join(keys, ",")+`]]`, 1), "more than 30"},
		{"a dimension without its member", strings.Replace(example, `"functionVersion":"$LATEST",`, ``, 1), `"functionVersion" has no root member`},
		{"a dimension that is not a string", strings.Replace(example, `"$LATEST"`, `7`, 1), "not a string"},
		{"an empty dimension value", strings.Replace(example, `"$LATEST"`, `""`, 1), "1..1024 characters"},
		{"a dimension value too long", strings.Replace(example, `"$LATEST"`, `"`+strings.Repeat("v", 1025)+`"`, 1), "1..1024 characters"},
		{"a metric without its member", strings.Replace(example, `"time":100,`, ``, 1), `"time" has no root member`},
		{"a metric that is a string", strings.Replace(example, `"time":100`, `"time":"100"`, 1), "neither a number"},
		{"101 values", strings.Replace(example, `"time":100`, `"time":[`+values+`]`, 1), "1..100"},
		{"an empty array", strings.Replace(example, `"time":100`, `"time":[]`, 1), "1..100"},
		{"a unit that is none", strings.Replace(example, `"Milliseconds"`, `"Millis"`, 1), "not a CloudWatch unit"},
		{"a storage resolution of 5", strings.Replace(example, `"StorageResolution":60`, `"StorageResolution":5`, 1), "1 or 60"},
		{"an extra member in a definition", strings.Replace(example, `"Name":"time"`, `"Name":"time","Stat":"p99"`, 1), `"Stat"`},
		{"a metric defined twice", strings.Replace(example, `"Metrics":[{"Name":"time","Unit":"Milliseconds","StorageResolution":60}]`,
			`"Metrics":[{"Name":"time"},{"Name":"time"}]`, 1), "defined twice"},
		{"a dimension that is a metric", strings.Replace(example, `"Metrics":[{"Name":"time"`, `"Metrics":[{"Name":"functionVersion"},{"Name":"time"`, 1),
			"both a dimension and a metric"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := emftest.Validate([]byte(tc.doc))
			require.ErrorContains(t, err, tc.want)
		})
	}

	defs := make([]string, 101)
	members := make([]string, 101)
	for i := range defs {
		defs[i] = `{"Name":"m` + strings.Repeat("x", i) + `"}`
		members[i] = `"m` + strings.Repeat("x", i) + `":1`
	}
	_, err = emftest.Validate([]byte(`{"_aws":{"Timestamp":1574109732004,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[[]],"Metrics":[` +
		strings.Join(defs, ",") + `]}]},` + strings.Join(members, ",") + `}`))
	require.ErrorContains(t, err, "101 definitions: more than 100")
}
