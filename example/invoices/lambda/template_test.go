package main

import (
	"bufio"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/invoices"
	"github.com/ddbworker/ddbworker/internal/prommetrics"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/lambda"
	"github.com/ddbworker/ddbworker/worker"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The main stays a registration: at most 10 lines, package clause and
// imports included.
func TestMainIsShort(t *testing.T) {
	f, err := os.Open("main.go")
	require.NoError(t, err)
	defer f.Close()
	lines := 0
	for s := bufio.NewScanner(f); s.Scan(); {
		lines++
	}
	require.LessOrEqual(t, lines, 10)
}

// The SAM template: only real resource types and the properties this
// template means, the event source mapping reports batch item failures,
// the queue's visibility timeout is at least six times the function's
// timeout, the execution role grants exactly the calls the function makes
// on exactly its table, queues and log group (and X-Ray's, which has no
// resources), and the function's environment is a configuration the
// adapter accepts.
func TestTemplate(t *testing.T) {
	tpl := loadTemplate(t, "../template.yaml")
	require.Equal(t, "AWS::Serverless-2016-10-31", tpl["Transform"])

	// Resource types and properties, as documented for CloudFormation and
	// SAM (a typo in a property name would be ignored by nothing: the
	// deploy fails).
	known := map[string][]string{
		"AWS::DynamoDB::Table": {"BillingMode", "AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes", "TimeToLiveSpecification",
			"PointInTimeRecoverySpecification", "TableName"},
		"AWS::SQS::Queue": {"VisibilityTimeout", "MessageRetentionPeriod", "SqsManagedSseEnabled", "RedrivePolicy"},
		"AWS::IAM::Role":  {"AssumeRolePolicyDocument", "ManagedPolicyArns", "Policies"},
		"AWS::Serverless::Function": {"CodeUri", "Handler", "Runtime", "Architectures", "MemorySize", "Timeout", "Role",
			"Environment", "Events", "Tracing", "LoggingConfig"},
		"AWS::Logs::LogGroup": {"LogGroupName", "RetentionInDays"},
		"AWS::CloudWatch::Alarm": {"AlarmDescription", "Namespace", "MetricName", "Dimensions", "Statistic", "Period", "EvaluationPeriods",
			"DatapointsToAlarm", "Threshold", "ComparisonOperator", "TreatMissingData", "AlarmActions"},
	}
	resources := tpl.m("Resources")
	for name := range resources {
		r := resources.m(name)
		allowed, ok := known[r.s("Type")]
		require.True(t, ok, "%s: unexpected resource type %s", name, r["Type"])
		for p := range r.m("Properties") {
			require.Contains(t, allowed, p, "%s (%s): unexpected property", name, r["Type"])
		}
	}

	fn := resources.m("InvoiceFunction")
	require.Equal(t, "AWS::Serverless::Function", fn.s("Type"))
	props := fn.m("Properties")
	require.Equal(t, "provided.al2023", props.s("Runtime"))
	require.Equal(t, []any{"arm64"}, props["Architectures"])
	require.Equal(t, "bootstrap", props.s("Handler"))
	// The build: BuildMethod makefile runs build-InvoiceFunction of the
	// Makefile in ContextPath, in a copy of CodeUri — the module root (see
	// TestBuild for what the target builds).
	build := fn.m("Metadata")
	require.Equal(t, "makefile", build.s("BuildMethod"), "sam build runs the Makefile's build-InvoiceFunction (go1.x cannot reach go.mod above CodeUri, in a container least of all)")
	require.Equal(t, []string{"BuildMethod", "ContextPath"}, sortedKeys(build), "the function's Metadata")
	makefile := filepath.Join("..", build.s("ContextPath"), "Makefile")
	require.Equal(t, filepath.Join("..", "lambda", "Makefile"), makefile, "the Makefile next to this main package")
	require.Regexp(t, `(?m)^build-InvoiceFunction:`, readFile(t, makefile), "the target sam build runs: build-<logical id>")
	codeURI, err := filepath.Abs(filepath.Join("..", props.s("CodeUri")))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(codeURI, "go.mod"))
	require.NoError(t, err, "CodeUri %s must be the module root: go build needs go.mod, and a container build sees CodeUri only", props.s("CodeUri"))
	for _, dir := range moduleDeps(t) {
		rel, err := filepath.Rel(codeURI, dir)
		require.NoError(t, err)
		require.False(t, rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)),
			"%s, which the function imports, is outside CodeUri: SAM's build cache would miss a change to it", dir)
	}
	require.Equal(t, map[string]any{"Fn::GetAtt": "FunctionRole.Arn"}, props["Role"])
	timeout := props.i(t, "Timeout")

	events := props.m("Events")
	require.Len(t, events, 1)
	ev := events.m("Work")
	require.Equal(t, "SQS", ev.s("Type"))
	sqsProps := ev.m("Properties")
	for p := range sqsProps {
		require.Contains(t, []string{"Queue", "BatchSize", "MaximumBatchingWindowInSeconds", "FunctionResponseTypes", "ScalingConfig", "Enabled", "FilterCriteria"}, p,
			"an SQS event's property (SAM)")
	}
	require.Equal(t, map[string]any{"Fn::GetAtt": "WorkQueue.Arn"}, sqsProps["Queue"])
	require.Equal(t, []any{"ReportBatchItemFailures"}, sqsProps["FunctionResponseTypes"], "the function reports batch item failures")
	batch := sqsProps.i(t, "BatchSize")
	require.True(t, batch >= 1 && batch <= 10000, "BatchSize %d", batch)
	window := sqsProps.i(t, "MaximumBatchingWindowInSeconds")
	require.True(t, window >= 0 && window <= 300, "MaximumBatchingWindowInSeconds %d", window)
	if batch > 10 {
		require.Positive(t, window, "a batch above 10 needs a batching window")
	}
	maxConc := sqsProps.m("ScalingConfig").i(t, "MaximumConcurrency")
	require.True(t, maxConc >= 2 && maxConc <= 1000, "ScalingConfig.MaximumConcurrency %d", maxConc)

	queue := resources.m("WorkQueue").m("Properties")
	require.GreaterOrEqual(t, queue.i(t, "VisibilityTimeout"), 6*timeout, "the queue's VisibilityTimeout is at least 6 × the function's Timeout")
	redrive := queue.m("RedrivePolicy")
	require.Equal(t, map[string]any{"Fn::GetAtt": "DeadLetterQueue.Arn"}, redrive["deadLetterTargetArn"])
	require.Equal(t, 10, redrive.i(t, "maxReceiveCount"))
	require.Equal(t, "AWS::SQS::Queue", resources.m("DeadLetterQueue").s("Type"))

	table := resources.m("Table").m("Properties")
	require.Equal(t, "PAY_PER_REQUEST", table.s("BillingMode"))
	require.Equal(t, []any{map[string]any{"AttributeName": "PK", "KeyType": "HASH"}, map[string]any{"AttributeName": "SK", "KeyType": "RANGE"}}, table["KeySchema"])
	var indexes []string
	for _, gsi := range table["GlobalSecondaryIndexes"].([]any) {
		g := tmap(gsi.(map[string]any))
		require.Equal(t, "KEYS_ONLY", g.m("Projection").s("ProjectionType"))
		indexes = append(indexes, g.s("IndexName"))
	}
	require.Equal(t, []string{"GSI1", "GSI2"}, indexes)
	require.Equal(t, map[string]any{"AttributeName": "ttl", "Enabled": true}, table["TimeToLiveSpecification"])

	// Least privilege: action → resources, and nothing on "*" but X-Ray's
	// two actions (X-Ray has no resource-level permissions); no managed
	// policy (AWSLambdaBasicExecutionRole would grant logs on every group).
	require.NotContains(t, resources.m("FunctionRole").m("Properties"), "ManagedPolicyArns")
	grants := roleGrants(t, tpl)
	require.Equal(t, map[string][]string{
		"dynamodb:PutItem":            {"Table"},
		"dynamodb:UpdateItem":         {"Table"},
		"dynamodb:GetItem":            {"Table"},
		"dynamodb:DescribeTable":      {"Table"},
		"dynamodb:DescribeTimeToLive": {"Table"}, // the cold start's tables.Verify
		"sqs:ReceiveMessage":          {"WorkQueue"},
		"sqs:DeleteMessage":           {"WorkQueue"},
		"sqs:GetQueueAttributes":      {"WorkQueue", "DeadLetterQueue"},
		"sqs:ChangeMessageVisibility": {"WorkQueue"},
		"sqs:SendMessage":             {"WorkQueue", "DeadLetterQueue"},
		"logs:CreateLogStream":        {"FunctionLogGroup"},
		"logs:PutLogEvents":           {"FunctionLogGroup"},
		"xray:PutTraceSegments":       {"*"},
		"xray:PutTelemetryRecords":    {"*"},
	}, grants)

	// Tracing (X-Ray) and the log group, kept LogRetentionInDays.
	require.Equal(t, "Active", props.s("Tracing"))
	require.Equal(t, map[string]any{"LogGroup": map[string]any{"Ref": "FunctionLogGroup"}}, props["LoggingConfig"])
	logs := resources.m("FunctionLogGroup")
	require.Equal(t, "AWS::Logs::LogGroup", logs.s("Type"))
	require.Equal(t, map[string]any{"Ref": "LogRetentionInDays"}, logs.m("Properties")["RetentionInDays"])
	params := tpl.m("Parameters")
	retention := params.m("LogRetentionInDays")
	require.Contains(t, retention["AllowedValues"], retention["Default"])
	require.Contains(t, retention["AllowedValues"], 3653, "CloudWatch Logs' retention periods")

	vars := props.m("Environment").m("Variables")
	require.Equal(t, map[string]any{"Ref": "MetricsNamespace"}, vars["DDBWORKER_METRICS_NAMESPACE"], "the namespace the alarms read")
	require.Equal(t, map[string]any{"Fn::If": []any{"ExportSpans", map[string]any{"Ref": "OtlpEndpoint"}, map[string]any{"Ref": "AWS::NoValue"}}},
		vars["OTEL_EXPORTER_OTLP_ENDPOINT"], "spans exported over OTLP when the OtlpEndpoint parameter is set, and only then")
}

// roleGrants is the function role's grants: action → the template
// resources it is granted on, in the template's order.
func roleGrants(t *testing.T, tpl tmap) map[string][]string {
	t.Helper()
	role := tpl.m("Resources").m("FunctionRole").m("Properties")
	grants := map[string][]string{}
	for _, p := range role["Policies"].([]any) {
		for _, st := range tmap(p.(map[string]any)).m("PolicyDocument")["Statement"].([]any) {
			s := tmap(st.(map[string]any))
			require.Equal(t, "Allow", s.s("Effect"))
			for _, a := range actions(s["Action"]) {
				grants[a] = append(grants[a], resourceName(t, s["Resource"]))
			}
		}
	}
	return grants
}

// iamRow is a row of the IAM actions table of docs/operate.md.
type iamRow struct {
	actions   []string
	resources []string // as written: "the table", "the queue", …
	needed    string   // "always", "on Lambda", or the condition
}

// readmeIAM reads the table under "## IAM actions" (docs/operate.md).
func readmeIAM(t *testing.T, path string) []iamRow {
	t.Helper()
	_, section, ok := strings.Cut(readFile(t, path), "\n## IAM actions\n")
	require.True(t, ok, "%s has a section ## IAM actions", path)
	action := regexp.MustCompile("`([a-z0-9-]+:[A-Za-z]+)`")
	var rows []iamRow
	inTable := false
	for line := range strings.Lines(section) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		require.Len(t, cells, 4, "a row of action | on | needed | for: %s", line)
		var row iamRow
		for _, m := range action.FindAllStringSubmatch(cells[0], -1) {
			row.actions = append(row.actions, m[1])
		}
		if len(row.actions) == 0 {
			continue // the header and its rule
		}
		for r := range strings.SplitSeq(strings.TrimSpace(cells[1]), ", ") {
			row.resources = append(row.resources, r)
		}
		row.needed = strings.TrimSpace(cells[2])
		rows = append(rows, row)
	}
	require.NotEmpty(t, rows, "the IAM actions table")
	return rows
}

// The IAM actions of docs/operate.md (the README's until it was cut to a
// front page) and the template's role are one list: the rows
// needed always and on Lambda are exactly what the role grants, on the
// resources the rows name; a row needed only under a condition (fused
// routes, a handler's deletes, checks or queries, payloads by S3
// reference) is not granted, and the role's comment names each such
// DynamoDB action. Old behaviour: the README listed the role's actions in
// two paragraphs of prose.
func TestTemplateRoleIsTheIAMTable(t *testing.T) {
	resource := map[string]string{"the table": "Table", "the queue": "WorkQueue", "the DLQ": "DeadLetterQueue",
		"the function's log group": "FunctionLogGroup", "`*`": "*"}
	want := map[string][]string{}
	var conditional []string
	for _, row := range readmeIAM(t, "../../../docs/operate.md") {
		for _, a := range row.actions {
			if row.needed != "always" && row.needed != "on Lambda" {
				conditional = append(conditional, a)
				continue
			}
			require.NotContains(t, want, a, "one row per action")
			for _, r := range row.resources {
				name, ok := resource[r]
				require.True(t, ok, "%s: %q is not a resource of the template", a, r)
				want[a] = append(want[a], name)
			}
			slices.Sort(want[a])
		}
	}
	require.NotContains(t, conditional, "dynamodb:BatchGetItem", "no route reads ahead")

	grants := roleGrants(t, loadTemplate(t, "../template.yaml"))
	for a := range grants {
		slices.Sort(grants[a])
	}
	require.Equal(t, want, grants, "the IAM actions docs/operate.md says are needed always and on Lambda are the role's grants")
	template := readFile(t, "../template.yaml")
	for _, a := range conditional {
		require.NotContains(t, grants, a, "needed only under a condition these handlers do not meet")
		if strings.HasPrefix(a, "dynamodb:") {
			require.Contains(t, template, a, "the role's comment names what a handler or route option adds")
		}
	}
}

// The adapter accepts the function's environment (references stand for
// what CloudFormation puts there; the table is a real one on the
// emulators, which the cold start reads).
func TestTemplateEnvironment(t *testing.T) {
	tpl := loadTemplate(t, "../template.yaml")
	table := testenv.New(t, testenv.Options{NoQueue: true}).Table
	vars := tpl.m("Resources").m("InvoiceFunction").m("Properties").m("Environment").m("Variables")
	refs := map[string]string{
		"MetricsNamespace": tpl.m("Parameters").m("MetricsNamespace").s("Default"),
		"Table":            table,
		"WorkQueue":        "https://sqs.eu-west-1.amazonaws.com/123456789012/invoices",
		"DeadLetterQueue":  "https://sqs.eu-west-1.amazonaws.com/123456789012/invoices-dlq",
		"OtlpEndpoint":     "http://127.0.0.1:4318", // the parameter given: nothing listens, and nothing is exported here
	}
	env := map[string]string{}
	for k, v := range vars {
		switch v := v.(type) {
		case string:
			env[k] = v
		case map[string]any:
			if ref, ok := v["Ref"].(string); ok {
				env[k] = refs[ref]
			} else if branches, ok := v["Fn::If"].([]any); ok {
				env[k] = refs[branches[1].(map[string]any)["Ref"].(string)]
			}
		}
		require.NotEmpty(t, env[k], "%s: %v", k, v)
	}
	require.Equal(t, table, env["DDBWORKER_TABLE"])
	_, err := lambda.New(context.Background(), func(reg *lambda.Registry, e lambda.Env) error {
		return (&invoices.Handler{Table: e.Store.Table}).Register(reg)
	}, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err, "the template's configuration")
}

// The alarms: on the DLQ's depth, the work queue's oldest message against
// the SLO parameter, the function's errors, and the function's own EMF
// metric of hash mismatches — under the namespace, name and dimensions the
// adapter writes it with. Each alarms on any (> 0) but the age, and
// notifies the optional topic.
func TestTemplateAlarms(t *testing.T) {
	tpl := loadTemplate(t, "../template.yaml")
	resources := tpl.m("Resources")
	alarms := map[string]tmap{}
	for name := range resources {
		if r := resources.m(name); r.s("Type") == "AWS::CloudWatch::Alarm" {
			alarms[name] = r.m("Properties")
		}
	}
	dims := func(a tmap) map[string]any {
		out := map[string]any{}
		for _, d := range a["Dimensions"].([]any) {
			out[tmap(d.(map[string]any)).s("Name")] = d.(map[string]any)["Value"]
		}
		return out
	}
	want := map[string]struct {
		namespace any
		metric    string
		dims      map[string]any
		threshold any
	}{
		"DeadLetterQueueNotEmpty": {"AWS/SQS", "ApproximateNumberOfMessagesVisible",
			map[string]any{"QueueName": map[string]any{"Fn::GetAtt": "DeadLetterQueue.QueueName"}}, 0},
		"OldestMessageAge": {"AWS/SQS", "ApproximateAgeOfOldestMessage",
			map[string]any{"QueueName": map[string]any{"Fn::GetAtt": "WorkQueue.QueueName"}}, map[string]any{"Ref": "OldestMessageAgeSLOSeconds"}},
		"FunctionErrors": {"AWS/Lambda", "Errors", map[string]any{"FunctionName": map[string]any{"Ref": "InvoiceFunction"}}, 0},
		"HashMismatch": {map[string]any{"Ref": "MetricsNamespace"}, "ddbworker_hash_mismatches_total", map[string]any{
			lambda.DimensionFunctionName: map[string]any{"Ref": "InvoiceFunction"},
			lambda.DimensionQueueName:    map[string]any{"Fn::GetAtt": "WorkQueue.QueueName"}}, 0},
	}
	require.Len(t, alarms, len(want))
	for name, w := range want {
		a, ok := alarms[name]
		require.True(t, ok, "alarm %s", name)
		require.Equal(t, w.namespace, a["Namespace"], name)
		require.Equal(t, w.metric, a.s("MetricName"), name)
		require.Equal(t, w.dims, dims(a), name)
		require.Equal(t, w.threshold, a["Threshold"], name)
		require.Equal(t, "GreaterThanThreshold", a.s("ComparisonOperator"), name)
		require.Equal(t, "notBreaching", a.s("TreatMissingData"), "%s: no data is no trouble", name)
		require.Equal(t, map[string]any{"Fn::If": []any{"NotifyTopic", []any{map[string]any{"Ref": "AlarmTopicArn"}}, map[string]any{"Ref": "AWS::NoValue"}}},
			a["AlarmActions"], name)
		require.Positive(t, a.i(t, "Period"), name)
	}
	require.Equal(t, "Maximum", alarms["DeadLetterQueueNotEmpty"].s("Statistic"), "any message at any moment of the minute")
	require.Equal(t, "Sum", alarms["HashMismatch"].s("Statistic"), "EMF writes the increase: any in the minute")
	slo := tpl.m("Parameters").m("OldestMessageAgeSLOSeconds")
	require.Equal(t, "Number", slo.s("Type"))
	require.Positive(t, slo.i(t, "Default"))

	// The hash-mismatch metric is one the worker registers and the adapter
	// writes (its EMF metrics are the worker's Prometheus ones).
	reg := prometheus.NewRegistry()
	metrics := prommetrics.New(reg)
	handlers := ddbworker.NewRegistry()
	require.NoError(t, (&invoices.Handler{Table: "invoices"}).Register(handlers))
	const queueURL = "https://sqs.us-east-1.amazonaws.com/000000000000/work"
	_, err := worker.New(worker.Deps{DynamoDB: dynamodb.New(dynamodb.Options{Region: "us-east-1"}), SQS: sqs.New(sqs.Options{Region: "us-east-1"}),
		Handlers: handlers, Metrics: metrics}, worker.Config{QueueURL: queueURL, DLQURL: queueURL + "-dlq", Store: inbox.Store{Table: "invoices"}})
	require.NoError(t, err)
	require.NoError(t, metrics.Err())
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	require.Contains(t, names, want["HashMismatch"].metric)
}

// TestBuild runs the Makefile target sam build runs (in the module root,
// as SAM does in its copy of CodeUri, and from this directory with a
// relative ARTIFACTS_DIR) and checks what it leaves in ARTIFACTS_DIR: a
// static Linux executable named bootstrap for the template's architecture,
// built with CGO_ENABLED=0 and -tags lambda.norpc. (It cannot run sam
// build itself: no SAM CLI and no Docker here.)
func TestBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a cross-compilation of the function")
	}
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make")
	}
	tpl := loadTemplate(t, "../template.yaml")
	props := tpl.m("Resources").m("InvoiceFunction").m("Properties")
	archs := props["Architectures"].([]any)
	require.Len(t, archs, 1)
	machine := map[string]elf.Machine{"arm64": elf.EM_AARCH64, "x86_64": elf.EM_X86_64}[archs[0].(string)]
	goarch := map[string]string{"arm64": "arm64", "x86_64": "amd64"}[archs[0].(string)]
	require.NotZero(t, machine, "Architectures %v", archs)
	makefile, err := filepath.Abs("Makefile")
	require.NoError(t, err)
	root, err := filepath.Abs(filepath.Join("..", props.s("CodeUri")))
	require.NoError(t, err)

	here, err := filepath.Abs(".")
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		dir  string                    // make's working directory
		out  func(t *testing.T) string // ARTIFACTS_DIR, as given
	}{
		{"as sam build runs it: in the module root, an absolute ARTIFACTS_DIR", root, func(t *testing.T) string { return t.TempDir() }},
		{"by hand: in a directory of the module, a relative ARTIFACTS_DIR", here, func(t *testing.T) string {
			rel, err := filepath.Rel(here, t.TempDir())
			require.NoError(t, err)
			return rel
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			artifacts := tc.out(t)
			cmd := exec.Command(mk, "--makefile", makefile, "build-InvoiceFunction", "ARTIFACTS_DIR="+artifacts)
			cmd.Dir = tc.dir
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "make build-InvoiceFunction:\n%s", out)
			if !filepath.IsAbs(artifacts) {
				artifacts = filepath.Join(tc.dir, artifacts)
			}
			requireStaticBootstrap(t, filepath.Join(artifacts, "bootstrap"), machine, goarch)
		})
	}
}

// requireStaticBootstrap checks a function's bootstrap: an executable
// Linux ELF for machine with no interpreter and no shared libraries, built
// for linux/goarch without cgo and with the lambda.norpc tag.
func requireStaticBootstrap(t *testing.T, path string, machine elf.Machine, goarch string) {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err, "no bootstrap in ARTIFACTS_DIR")
	require.NotZero(t, fi.Mode().Perm()&0o100, "bootstrap is executable")
	f, err := elf.Open(path)
	require.NoError(t, err, "bootstrap is an ELF binary")
	defer f.Close()
	require.Equal(t, elf.ELFOSABI_NONE, f.OSABI)
	require.Equal(t, elf.ET_EXEC, f.Type, "a static executable (not PIE, not a shared object)")
	require.Equal(t, machine, f.Machine, "the template's architecture")
	for _, p := range f.Progs {
		require.NotEqual(t, elf.PT_INTERP, p.Type, "statically linked: no dynamic loader")
		require.NotEqual(t, elf.PT_DYNAMIC, p.Type, "statically linked: no dynamic section")
	}
	libs, err := f.ImportedLibraries()
	require.NoError(t, err)
	require.Empty(t, libs)
	info, err := buildinfo.ReadFile(path)
	require.NoError(t, err)
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	require.Equal(t, "github.com/ddbworker/ddbworker/example/invoices/lambda", info.Path)
	require.Equal(t, "linux", settings["GOOS"])
	require.Equal(t, goarch, settings["GOARCH"])
	require.Equal(t, "0", settings["CGO_ENABLED"])
	require.Equal(t, "lambda.norpc", settings["-tags"])
}

// moduleDeps are the directories of this module's packages the function
// links.
func moduleDeps(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", ".").Output()
	require.NoError(t, err)
	dirs := strings.Fields(string(out))
	require.NotEmpty(t, dirs)
	return dirs
}

func sortedKeys(m tmap) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// cfn-lint, when it is installed, validates the template against
// CloudFormation's and SAM's own schemas (the SAM transform included).
func TestTemplateCFNLint(t *testing.T) {
	lint, err := exec.LookPath("cfn-lint")
	if err != nil {
		t.Skip("cfn-lint is not installed (pip install cfn-lint): the template is checked by TestTemplate only")
	}
	out, err := exec.Command(lint, "../template.yaml").CombinedOutput()
	require.NoError(t, err, "cfn-lint:\n%s", out)
}

// tmap is a YAML mapping with typed accessors.
type tmap map[string]any

func (m tmap) m(key string) tmap {
	v, _ := m[key].(map[string]any)
	return v
}

func (m tmap) s(key string) string {
	v, _ := m[key].(string)
	return v
}

func (m tmap) i(t *testing.T, key string) int {
	t.Helper()
	n, ok := m[key].(int)
	require.True(t, ok, "%s: not an integer: %#v", key, m[key])
	return n
}

// actions are an IAM statement's Action: a string or a list.
func actions(v any) []string {
	if s, ok := v.(string); ok {
		return []string{s}
	}
	var out []string
	for _, a := range v.([]any) {
		out = append(out, a.(string))
	}
	return out
}

// resourceName names the template resource an IAM Resource stands for:
// !GetAtt X.Arn is X; the table's !If (created, or an existing one by
// name) is Table; "*" is "*" (TestTemplate allows it for X-Ray alone).
// Anything else fails.
func resourceName(t *testing.T, v any) string {
	t.Helper()
	if v == "*" {
		return "*"
	}
	m, ok := v.(map[string]any)
	require.True(t, ok, "an IAM Resource must name a resource of this template: %v", v)
	if att, ok := m["Fn::GetAtt"].(string); ok && strings.HasSuffix(att, ".Arn") {
		return strings.TrimSuffix(att, ".Arn")
	}
	if branches, ok := m["Fn::If"].([]any); ok && len(branches) == 3 && branches[0] == "CreateTable" {
		require.Equal(t, map[string]any{"Fn::GetAtt": "Table.Arn"}, branches[1])
		sub, _ := branches[2].(map[string]any)["Fn::Sub"].(string)
		require.True(t, strings.HasSuffix(sub, ":table/${ExistingTableName}"), "the existing table's ARN: %s", sub)
		return "Table"
	}
	t.Fatalf("an IAM Resource must name a resource of this template: %v", v)
	return ""
}

// loadTemplate parses a CloudFormation template, its short-form intrinsic
// functions (!Ref, !GetAtt, !Sub, !If, !Equals, …) turned into their long
// form ({"Ref": …}, {"Fn::GetAtt": …}).
func loadTemplate(t *testing.T, path string) tmap {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(raw, &doc), "valid YAML")
	v, err := cfnValue(doc.Content[0])
	require.NoError(t, err)
	return v.(map[string]any)
}

func cfnValue(n *yaml.Node) (any, error) {
	if fn, ok := strings.CutPrefix(n.Tag, "!"); ok && !strings.HasPrefix(n.Tag, "!!") {
		inner := *n
		inner.Tag = ""
		v, err := cfnValue(&inner)
		if err != nil {
			return nil, err
		}
		if fn == "Ref" {
			return map[string]any{"Ref": v}, nil
		}
		return map[string]any{"Fn::" + fn: v}, nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		out := map[string]any{}
		for i := 0; i < len(n.Content); i += 2 {
			v, err := cfnValue(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			if _, dup := out[n.Content[i].Value]; dup {
				return nil, fmt.Errorf("line %d: key %s twice", n.Content[i].Line, n.Content[i].Value)
			}
			out[n.Content[i].Value] = v
		}
		return out, nil
	case yaml.SequenceNode:
		out := []any{}
		for _, c := range n.Content {
			v, err := cfnValue(c)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, err
		}
		return v, nil
	}
	return nil, fmt.Errorf("line %d: unexpected YAML node", n.Line)
}
