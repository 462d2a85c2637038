package lambda

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/lambda/internal/emf"
	"github.com/ddbworker/ddbworker/s3payload"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

// The environment variables the adapter reads: the daemon's names (its
// flag --some-flag is DDBWORKER_SOME_FLAG) where the setting applies to a
// Lambda function, with the daemon's defaults.
const (
	envTable             = "DDBWORKER_TABLE"
	envQueueURL          = "DDBWORKER_QUEUE_URL"
	envDLQURL            = "DDBWORKER_DLQ_URL"
	envTerminalPolicy    = "DDBWORKER_TERMINAL_POLICY"
	envConcurrency       = "DDBWORKER_CONCURRENCY"
	envMaxAttempts       = "DDBWORKER_MAX_ATTEMPTS"
	envCallTimeout       = "DDBWORKER_CALL_TIMEOUT"
	envClockSkew         = "DDBWORKER_CLOCK_SKEW"
	envMaxWCU            = "DDBWORKER_MAX_WCU"
	envPayloadMaxBytes   = "DDBWORKER_PAYLOAD_MAX_BYTES"
	envHealthFailures    = "DDBWORKER_HEALTH_MIN_FAILURES"
	envHealthWindow      = "DDBWORKER_HEALTH_WINDOW"
	envProbeMaxInterval  = "DDBWORKER_PROBE_MAX_INTERVAL"
	envParkVisibility    = "DDBWORKER_PARK_VISIBILITY"
	envParkMaxVisibility = "DDBWORKER_PARK_MAX_VISIBILITY"
	envMaxTakeovers      = "DDBWORKER_MAX_TAKEOVERS"
	envMinOutageCover    = "DDBWORKER_MIN_OUTAGE_COVER"
	envAttentionShards   = "DDBWORKER_ATTENTION_SHARDS"
	envIndexProcessing   = "DDBWORKER_INDEX_PROCESSING"
	envCompletedTTL      = "DDBWORKER_COMPLETED_TTL"
	envFailedTTL         = "DDBWORKER_FAILED_TTL"
	envProcessingTTL     = "DDBWORKER_PROCESSING_TTL"
	envRequestHash       = "DDBWORKER_REQUEST_HASH_VERSION"
	envLogLevel          = "DDBWORKER_LOG_LEVEL"
	envMetricsNamespace  = "DDBWORKER_METRICS_NAMESPACE"
)

// layoutVars are the inbox layout's variables (the daemon's
// --*-attribute and --*-index flags).
var layoutVars = []struct {
	name  string
	field func(*tables.Layout) *string
}{
	{envPKAttribute, func(l *tables.Layout) *string { return &l.PartitionKey }},
	{envSKAttribute, func(l *tables.Layout) *string { return &l.SortKey }},
	{"DDBWORKER_AGGREGATE_INDEX", func(l *tables.Layout) *string { return &l.AggregateIndex }},
	{"DDBWORKER_AGGREGATE_PK_ATTRIBUTE", func(l *tables.Layout) *string { return &l.AggregatePK }},
	{"DDBWORKER_AGGREGATE_SK_ATTRIBUTE", func(l *tables.Layout) *string { return &l.AggregateSK }},
	{"DDBWORKER_ATTENTION_INDEX", func(l *tables.Layout) *string { return &l.AttentionIndex }},
	{"DDBWORKER_ATTENTION_PK_ATTRIBUTE", func(l *tables.Layout) *string { return &l.AttentionPK }},
	{"DDBWORKER_ATTENTION_SK_ATTRIBUTE", func(l *tables.Layout) *string { return &l.AttentionSK }},
	{"DDBWORKER_TTL_ATTRIBUTE", func(l *tables.Layout) *string { return &l.TTL }},
}

// notUnderLambda are daemon settings that have no meaning in a Lambda
// function, with what decides instead; New warns when one is set.
var notUnderLambda = map[string]string{
	"DDBWORKER_REGION":             "the SDK's AWS_REGION (set by Lambda) is used",
	"DDBWORKER_DYNAMODB_ENDPOINT":  "set AWS_ENDPOINT_URL_DYNAMODB instead",
	"DDBWORKER_SQS_ENDPOINT":       "set AWS_ENDPOINT_URL_SQS instead",
	"DDBWORKER_BATCH_SIZE":         "the event source mapping's BatchSize decides",
	"DDBWORKER_WAIT_TIME":          "the event source mapping polls the queue",
	"DDBWORKER_VISIBILITY_TIMEOUT": "the queue's VisibilityTimeout applies, and each record's lease ends with the invocation",
	"DDBWORKER_MESSAGE_TIMEOUT":    "each record must finish 2s before the invocation's deadline",
	"DDBWORKER_DRAIN_TIMEOUT":      "an invocation ends when its records are settled",
	"DDBWORKER_STARTUP_TIMEOUT":    "a configuration problem fails the function's init",
	"DDBWORKER_METRICS_ADDR":       "a function serves no /metrics: it writes its metrics as CloudWatch EMF log lines (DDBWORKER_METRICS_NAMESPACE)",
	"DDBWORKER_DEPTH_INTERVAL":     "use the queue's CloudWatch metrics",
}

// lambdaLease is the worker's VisibilityTimeout under Lambda. The
// invocation's deadline is every record's lease; this bounds
// DDBWORKER_CALL_TIMEOUT and DDBWORKER_CLOCK_SKEW and is the wait of a
// record found in flight elsewhere whose lease cannot be read: the
// daemon's default lease.
const lambdaLease = worker.DefaultVisibilityTimeout

// sqsMaxVisibility is SQS's longest visibility timeout.
const sqsMaxVisibility = 12 * time.Hour

// settings is the configuration the environment describes.
type settings struct {
	store    inbox.Store
	queueURL string        // DDBWORKER_QUEUE_URL, or "" (from the records)
	worker   worker.Config // without Store and QueueURL
	logLevel slog.Level
	// given reports the store settings the environment sets explicitly
	// (the others are taken from the table's record); keyGiven the table
	// key variables it sets (the others are taken from the table's key).
	given    func(inbox.Setting) bool
	keyGiven map[string]bool
	// minOutageCover is DDBWORKER_MIN_OUTAGE_COVER.
	minOutageCover time.Duration
	// metricsNamespace is DDBWORKER_METRICS_NAMESPACE: the CloudWatch
	// namespace of the function's EMF metrics.
	metricsNamespace string
}

// settingVars are the variables of the recorded store settings, the
// layout's names too.
var settingVars = map[inbox.Setting]string{
	inbox.SettingAttentionShards: envAttentionShards, inbox.SettingIndexProcessing: envIndexProcessing,
	inbox.SettingCompletedTTL: envCompletedTTL, inbox.SettingFailedTTL: envFailedTTL, inbox.SettingProcessingTTL: envProcessingTTL,
	inbox.SettingAggregateIndex: "DDBWORKER_AGGREGATE_INDEX", inbox.SettingAggregatePK: "DDBWORKER_AGGREGATE_PK_ATTRIBUTE",
	inbox.SettingAggregateSK: "DDBWORKER_AGGREGATE_SK_ATTRIBUTE", inbox.SettingAttentionIndex: "DDBWORKER_ATTENTION_INDEX",
	inbox.SettingAttentionPK: "DDBWORKER_ATTENTION_PK_ATTRIBUTE", inbox.SettingAttentionSK: "DDBWORKER_ATTENTION_SK_ATTRIBUTE",
	inbox.SettingTTLAttribute: "DDBWORKER_TTL_ATTRIBUTE", inbox.SettingRequestHash: envRequestHash,
}

// The table's key attributes' variables: its key schema says them (the
// settings item is stored under them), so they are never recorded.
const (
	envPKAttribute = "DDBWORKER_PK_ATTRIBUTE"
	envSKAttribute = "DDBWORKER_SK_ATTRIBUTE"
)

// DefaultMinOutageCover is DDBWORKER_MIN_OUTAGE_COVER's default: the
// adapter warns at cold start when a FIFO queue's redrive policy lets a
// shorter DynamoDB outage dead-letter healthy messages (a standard queue's
// covers any: worker.HealthConfig.OutageCover).
const DefaultMinOutageCover = 6 * time.Hour

// envReader reads variables and collects every problem, each naming its
// variable. An empty variable is the same as an unset one (a template
// parameter left empty).
type envReader struct {
	lookup func(string) (string, bool)
	errs   []string
}

func (r *envReader) get(name string) (string, bool) {
	v, ok := r.lookup(name)
	v = strings.TrimSpace(v)
	return v, ok && v != ""
}

func (r *envReader) fail(name, v, format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf("%s=%q: %s", name, v, fmt.Sprintf(format, args...)))
}

func (r *envReader) str(name, def string) string {
	if v, ok := r.get(name); ok {
		return v
	}
	return def
}

func (r *envReader) integer(name string, def, lo, hi int) int {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	switch {
	case err != nil:
		r.fail(name, v, "not an integer")
	case n < lo || n > hi:
		r.fail(name, v, "must be within %d..%d", lo, hi)
	default:
		return n
	}
	return def
}

func (r *envReader) float(name string, def, lo float64) float64 {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	switch {
	case err != nil:
		r.fail(name, v, "not a number")
	case f < lo:
		r.fail(name, v, "must be at least %v", lo)
	default:
		return f
	}
	return def
}

// duration reads a Go duration ("5s", "840h") within [lo, hi) (hi 0: no
// upper bound).
func (r *envReader) duration(name string, def, lo, hi time.Duration) time.Duration {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		r.fail(name, v, "not a duration (e.g. 5s, 2m, 840h)")
	case d < lo || (hi > 0 && d >= hi):
		if hi > 0 {
			r.fail(name, v, "must be at least %s and less than %s", lo, hi)
		} else {
			r.fail(name, v, "must be at least %s", lo)
		}
	default:
		return d
	}
	return def
}

// durationWithin reads a Go duration within [lo, hi].
func (r *envReader) durationWithin(name string, def, lo, hi time.Duration) time.Duration {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		r.fail(name, v, "not a duration (e.g. 5s, 2m, 840h)")
	case d < lo || d > hi:
		r.fail(name, v, "must be within %s..%s", lo, hi)
	default:
		return d
	}
	return def
}

func (r *envReader) boolean(name string) bool {
	v, ok := r.get(name)
	if !ok {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.fail(name, v, "not a boolean (true or false)")
	}
	return b
}

// readSettings reads the configuration from the environment. Every problem
// is reported in one line, each naming its variable.
func readSettings(lookup func(string) (string, bool)) (settings, error) {
	r := &envReader{lookup: lookup}
	var s settings

	s.store.Table = r.str(envTable, "")
	if s.store.Table == "" {
		r.errs = append(r.errs, envTable+" is required: the DynamoDB table of the inbox records (and usually of the service's items)")
	}
	for _, v := range layoutVars {
		*v.field(&s.store.Layout) = r.str(v.name, "")
	}
	s.store.AttentionShards = r.integer(envAttentionShards, inbox.DefaultAttentionShards, 1, 100)
	s.store.IndexProcessing = r.boolean(envIndexProcessing)
	s.store.TTL.Completed = r.duration(envCompletedTTL, inbox.DefaultCompletedTTL, 28*24*time.Hour, 0)
	s.store.TTL.Failed = r.duration(envFailedTTL, inbox.DefaultFailedTTL, time.Hour, 0)
	s.store.TTL.Processing = r.duration(envProcessingTTL, inbox.DefaultProcessingTTL, time.Hour, 0)
	switch v := r.str(envRequestHash, "v2"); v {
	case "v2", "2":
		s.store.RequestHashVersion = 2
	case "v3", "3":
		s.store.RequestHashVersion = 3
	default:
		r.fail(envRequestHash, v, "must be v2 or v3")
	}

	if s.queueURL = r.str(envQueueURL, ""); s.queueURL != "" && queueID(s.queueURL) == "" {
		r.fail(envQueueURL, s.queueURL, "not a queue URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME)")
	}
	c := &s.worker
	c.DLQURL = r.str(envDLQURL, "")
	if c.DLQURL != "" && queueID(c.DLQURL) == "" {
		r.fail(envDLQURL, c.DLQURL, "not a queue URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME)")
	}
	policy := r.str(envTerminalPolicy, string(worker.DefaultTerminalPolicy))
	switch c.TerminalPolicy = worker.TerminalPolicy(policy); c.TerminalPolicy {
	case worker.PolicyDLQ:
		if c.DLQURL == "" {
			r.errs = append(r.errs, envDLQURL+" is required with "+envTerminalPolicy+"=dlq (the default): terminal work is copied there")
		}
	case worker.PolicyQuarantine, worker.PolicyRedrive:
	default:
		r.fail(envTerminalPolicy, policy, "must be dlq, quarantine or redrive")
	}
	// The records in flight are the execution environment's, which every
	// invocation it runs at once shares (Lambda Managed Instances): by
	// default as many per concurrent invocation as a single-concurrency
	// environment has, so that the records of invocations arriving
	// together are not handed back unstarted for want of a slot. The
	// adaptive limit, the health gate and DDBWORKER_MAX_WCU still hold
	// the database's load.
	c.Concurrency = r.integer(envConcurrency, min(worker.MaxConcurrency, worker.DefaultConcurrency*maxConcurrency(lookup)), 1, worker.MaxConcurrency)
	c.MaxAttempts = r.integer(envMaxAttempts, worker.DefaultMaxAttempts, 1, 100)
	c.MaxTakeovers = r.integer(envMaxTakeovers, worker.DefaultMaxTakeovers, 1, 100)
	// 0: the worker's DefaultCallTimeout, or half of the lease when shorter.
	c.CallTimeout = r.duration(envCallTimeout, 0, 100*time.Millisecond, lambdaLease)
	if skew := r.duration(envClockSkew, worker.DefaultClockSkew, 0, lambdaLease); skew == 0 {
		c.ClockSkew = worker.Zero // the daemon's --clock-skew 0: no margin
	} else {
		c.ClockSkew = skew
	}
	c.MaxWCU = r.float(envMaxWCU, 0, 0)
	c.Payload.MaxBytes = int64(r.integer(envPayloadMaxBytes, int(s3payload.DefaultMaxBytes), 1, math.MaxInt32))
	c.Health.MinFailures = r.integer(envHealthFailures, worker.DefaultHealthMinFailures, 1, math.MaxInt32)
	c.Health.Window = r.duration(envHealthWindow, worker.DefaultHealthWindow, 100*time.Millisecond, 0)
	c.Health.ProbeMaxInterval = r.duration(envProbeMaxInterval, worker.DefaultProbeMaxInterval, worker.DefaultProbeInterval, 0)
	c.Health.ParkVisibility = r.durationWithin(envParkVisibility, worker.DefaultParkVisibility, time.Second, time.Hour)
	c.Health.ParkMaxVisibility = r.durationWithin(envParkMaxVisibility, worker.DefaultParkMaxVisibility, time.Second, sqsMaxVisibility)
	if c.Health.ParkMaxVisibility < c.Health.ParkVisibility {
		v, _ := r.get(envParkMaxVisibility)
		r.fail(envParkMaxVisibility, v, "must be at least %s (%s)", envParkVisibility, c.Health.ParkVisibility)
	}
	c.VisibilityTimeout = lambdaLease
	s.minOutageCover = r.duration(envMinOutageCover, DefaultMinOutageCover, 0, 0)
	explicit := map[inbox.Setting]bool{}
	for setting, name := range settingVars {
		_, explicit[setting] = r.get(name)
	}
	s.given = func(setting inbox.Setting) bool { return explicit[setting] }
	s.keyGiven = map[string]bool{}
	for _, name := range []string{envPKAttribute, envSKAttribute} {
		_, s.keyGiven[name] = r.get(name)
	}

	s.metricsNamespace = r.str(envMetricsNamespace, DefaultMetricsNamespace)
	if err := emf.CheckNamespace(s.metricsNamespace); err != nil {
		r.fail(envMetricsNamespace, s.metricsNamespace, "%s", strings.TrimPrefix(err.Error(), "emf: "))
	}

	level := r.str(envLogLevel, "info")
	if err := s.logLevel.UnmarshalText([]byte(level)); err != nil {
		r.fail(envLogLevel, level, "must be debug, info, warn or error")
	}

	if len(r.errs) == 0 {
		var err error
		if s.store, err = s.store.WithDefaults(); err != nil {
			r.errs = append(r.errs, fmt.Sprintf("the inbox store (%s, DDBWORKER_*_ATTRIBUTE, DDBWORKER_*_INDEX, %s, DDBWORKER_*_TTL): %s",
				envTable, envAttentionShards, strings.ReplaceAll(err.Error(), "\n", "; ")))
		}
	}
	if len(r.errs) > 0 {
		return settings{}, errors.New("lambda: invalid environment: " + strings.Join(r.errs, "; "))
	}
	s.worker.Store = s.store
	return s, nil
}

// queueID is the "ACCOUNT/NAME" a queue URL ends with ("" if it does not
// look like one), which identifies a queue whatever the URL's host (AWS's
// sqs.REGION.amazonaws.com, the legacy queue.amazonaws.com, a VPC
// endpoint, an emulator).
func queueID(queueURL string) string {
	u, err := url.Parse(queueURL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return ""
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return ""
	}
	return parts[0] + "/" + parts[1]
}
