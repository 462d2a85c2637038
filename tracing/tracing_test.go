package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/ddbworker/ddbworker/tracing"
)

func spanContext(t *testing.T, traceID, spanID string, sampled bool, state string) trace.SpanContext {
	t.Helper()
	tid, err := trace.TraceIDFromHex(traceID)
	require.NoError(t, err)
	sid, err := trace.SpanIDFromHex(spanID)
	require.NoError(t, err)
	cfg := trace.SpanContextConfig{TraceID: tid, SpanID: sid, Remote: true}
	if sampled {
		cfg.TraceFlags = trace.FlagsSampled
	}
	if state != "" {
		ts, err := trace.ParseTraceState(state)
		require.NoError(t, err)
		cfg.TraceState = ts
	}
	return trace.NewSpanContext(cfg)
}

func str(s string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
}

func TestFromXRay(t *testing.T) {
	for _, tc := range []struct {
		name, header      string
		ok                bool
		traceID, parentID string
		sampled           bool
	}{
		{"sampled", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1", true,
			"5759e988bd862e3fe1be46a994272793", "53995c3f42cd8ad8", true},
		{"not sampled, lineage, spaces", "Root=1-5759e988-bd862e3fe1be46a994272793; Parent=53995c3f42cd8ad8; Sampled=0;Lineage=a87bd80c:1", true,
			"5759e988bd862e3fe1be46a994272793", "53995c3f42cd8ad8", false},
		{"sampling deferred", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=?", true,
			"5759e988bd862e3fe1be46a994272793", "53995c3f42cd8ad8", false},
		{"fields in any order", "Sampled=1;Parent=53995c3f42cd8ad8;Root=1-5759e988-bd862e3fe1be46a994272793", true,
			"5759e988bd862e3fe1be46a994272793", "53995c3f42cd8ad8", true},
		{"no parent (a root segment)", "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1", false, "", "", false},
		{"other version", "Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8", false, "", "", false},
		{"short root", "Root=1-5759e988-bd862e3f;Parent=53995c3f42cd8ad8", false, "", "", false},
		{"not hex", "Root=1-5759e988-zz862e3fe1be46a994272793;Parent=53995c3f42cd8ad8", false, "", "", false},
		{"zero parent", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=0000000000000000", false, "", "", false},
		{"empty", "", false, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, ok := tracing.FromXRay(tc.header)
			require.Equal(t, tc.ok, ok)
			if !tc.ok {
				return
			}
			require.Equal(t, tc.traceID, sc.TraceID().String())
			require.Equal(t, tc.parentID, sc.SpanID().String())
			require.Equal(t, tc.sampled, sc.IsSampled())
			require.True(t, sc.IsRemote())
			back, ok := tracing.FromXRay(tracing.ToXRay(sc))
			require.True(t, ok)
			require.Equal(t, sc, back, "ToXRay is its inverse")
		})
	}
}

func TestExtract(t *testing.T) {
	w3c := spanContext(t, "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", true, "vendor=x")
	xray := "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	for _, tc := range []struct {
		name    string
		attrs   map[string]types.MessageAttributeValue
		system  map[string]string
		traceID string
	}{
		{"traceparent", tracing.Carry(w3c), nil, "0af7651916cd43dd8448eb211c80319c"},
		{"traceparent wins over AWSTraceHeader", tracing.Carry(w3c), map[string]string{tracing.SystemAttrAWSTraceHeader: xray}, "0af7651916cd43dd8448eb211c80319c"},
		{"AWSTraceHeader alone", nil, map[string]string{tracing.SystemAttrAWSTraceHeader: xray}, "5759e988bd862e3fe1be46a994272793"},
		{"a malformed traceparent falls back", map[string]types.MessageAttributeValue{tracing.AttrTraceparent: str("00-xyz")},
			map[string]string{tracing.SystemAttrAWSTraceHeader: xray}, "5759e988bd862e3fe1be46a994272793"},
		{"none", map[string]types.MessageAttributeValue{"tenant": str("t-1")}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := tracing.Extract(tc.attrs, tc.system)
			if tc.traceID == "" {
				require.False(t, sc.IsValid())
				return
			}
			require.True(t, sc.IsValid())
			require.Equal(t, tc.traceID, sc.TraceID().String())
		})
	}
	got := tracing.Extract(tracing.Carry(w3c), nil)
	require.Equal(t, "vendor=x", got.TraceState().String(), "tracestate travels")
	require.Equal(t, w3c.SpanID(), got.SpanID())
}

// An SNS notification (raw delivery off) carries the publisher's message
// attributes in its body: ExtractDelivery reads a traceparent there, after
// the SQS message's own and before its AWSTraceHeader.
func TestExtractDelivery(t *testing.T) {
	w3c := spanContext(t, "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", true, "vendor=x")
	other := spanContext(t, "11111111111111111111111111111111", "2222222222222222", true, "")
	xray := "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	notification := func(attrs string) string {
		return `{"Type" : "Notification", "MessageId" : "m-1", "TopicArn" : "arn:aws:sns:eu-west-1:123:orders", "Message" : "{\"traceparent\":\"00-11111111111111111111111111111111-2222222222222222-01\"}",
			"Timestamp" : "2025-06-01T12:00:00.000Z", "MessageAttributes" : ` + attrs + `}`
	}
	carried := tracing.Carry(w3c)
	sns := notification(`{"eventType":{"Type":"String","Value":"OrderPlaced"},"traceparent":{"Type":"String","Value":"` +
		aws.ToString(carried[tracing.AttrTraceparent].StringValue) + `"},"tracestate":{"Type":"String","Value":"vendor=x"}}`)
	for _, tc := range []struct {
		name    string
		attrs   map[string]types.MessageAttributeValue
		system  map[string]string
		body    string
		traceID string
	}{
		{"in the notification", nil, nil, sns, "0af7651916cd43dd8448eb211c80319c"},
		{"the notification's wins over AWSTraceHeader", nil, map[string]string{tracing.SystemAttrAWSTraceHeader: xray}, sns, "0af7651916cd43dd8448eb211c80319c"},
		{"the SQS message's own wins", tracing.Carry(other), nil, sns, "11111111111111111111111111111111"},
		{"not in the Message", nil, nil, notification(`{}`), ""},
		{"a Binary attribute is not one", nil, nil, notification(`{"traceparent":{"Type":"Binary","Value":"MDAt"}}`), ""},
		{"malformed, falls back", nil, map[string]string{tracing.SystemAttrAWSTraceHeader: xray},
			notification(`{"traceparent":{"Type":"String","Value":"00-xyz"}}`), "5759e988bd862e3fe1be46a994272793"},
		{"not a notification", nil, nil, `{"Type":"Event","MessageAttributes":{"traceparent":{"Type":"String","Value":"` +
			aws.ToString(carried[tracing.AttrTraceparent].StringValue) + `"}}}`, ""},
		{"not JSON", nil, nil, `"traceparent" {`, ""},
		{"an envelope", nil, nil, `{"schemaVersion":1,"messageType":"T"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := tracing.ExtractDelivery(tc.attrs, tc.system, tc.body)
			if tc.traceID == "" {
				require.False(t, sc.IsValid())
				return
			}
			require.True(t, sc.IsValid())
			require.Equal(t, tc.traceID, sc.TraceID().String())
			require.True(t, sc.IsRemote())
		})
	}
	got := tracing.FromSNS(sns)
	require.Equal(t, w3c.SpanID(), got.SpanID())
	require.Equal(t, "vendor=x", got.TraceState().String(), "tracestate travels")
}

func TestInject(t *testing.T) {
	sc := spanContext(t, "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", true, "vendor=x")
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	attrs := func(n int) map[string]types.MessageAttributeValue {
		m := map[string]types.MessageAttributeValue{}
		for i := range n {
			m["a"+strconv.Itoa(i)] = str("v")
		}
		return m
	}
	for _, tc := range []struct {
		name                    string
		ctx                     context.Context
		in                      map[string]types.MessageAttributeValue
		traceparent, tracestate bool
	}{
		{"nil attributes", ctx, nil, true, true},
		{"room for both", ctx, attrs(8), true, true},
		{"room for one: traceparent", ctx, attrs(9), true, false},
		{"no room: the sender's attributes stay", ctx, attrs(10), false, false},
		{"no span", context.Background(), attrs(1), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(tc.in)
			out := tracing.Inject(tc.ctx, tc.in)
			require.Len(t, tc.in, before, "the caller's map is not changed")
			_, tp := out[tracing.AttrTraceparent]
			_, ts := out[tracing.AttrTracestate]
			require.Equal(t, tc.traceparent, tp)
			require.Equal(t, tc.tracestate, ts)
			require.LessOrEqual(t, len(out), 10)
			if tp {
				require.Equal(t, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", aws.ToString(out[tracing.AttrTraceparent].StringValue))
				require.Equal(t, "String", aws.ToString(out[tracing.AttrTraceparent].DataType))
			}
		})
	}
	own := map[string]types.MessageAttributeValue{tracing.AttrTraceparent: str("00-11111111111111111111111111111111-2222222222222222-01")}
	require.Equal(t, own, tracing.Inject(ctx, own), "a creation context the sender chose is kept")
}

func TestKeyHash(t *testing.T) {
	require.Equal(t, "2c26b46b68ffc68f", tracing.KeyHash("foo"), "the first 16 hex digits of SHA-256")
	require.NotContains(t, tracing.KeyHash("alice@example.com"), "alice")
}

func TestLogHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(tracing.LogHandler(slog.NewJSONHandler(&buf, nil))).With("service", "s")
	sc := spanContext(t, "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", true, "")
	log.InfoContext(trace.ContextWithSpanContext(context.Background(), sc), "inside")
	log.InfoContext(context.Background(), "outside")
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	require.Len(t, lines, 2)
	var in, out map[string]any
	require.NoError(t, json.Unmarshal(lines[0], &in))
	require.NoError(t, json.Unmarshal(lines[1], &out))
	require.Equal(t, "0af7651916cd43dd8448eb211c80319c", in[tracing.LogTraceID])
	require.Equal(t, "b7ad6b7169203331", in[tracing.LogSpanID])
	require.Equal(t, "s", in["service"], "WithAttrs keeps the wrapper")
	require.NotContains(t, out, tracing.LogTraceID)
}
