package worker

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/metricstest"
	"github.com/ddbworker/ddbworker/internal/sqsbatch"
	"github.com/ddbworker/ddbworker/tracing"
)

const (
	testTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	testXRay        = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	// testXRayAsW3C is testXRay as the traceparent a copy carries.
	testXRayAsW3C = "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
)

// producerAttrs are n producer attributes p0…p<n-1>, by name in that
// order.
func producerAttrs(n int) map[string]types.MessageAttributeValue {
	out := map[string]types.MessageAttributeValue{}
	for i := range n {
		out[fmt.Sprintf("p%d", i)] = strAttr("v")
	}
	return out
}

func names(attrs map[string]types.MessageAttributeValue) []string {
	return slices.Sorted(maps.Keys(attrs))
}

func strValue(attrs map[string]types.MessageAttributeValue, name string) string {
	return aws.ToString(attrs[name].StringValue)
}

// The copies the worker makes within SQS's 10 attributes when the message
// carries 8 to 10 attributes of its own with its trace context as
// traceparent/tracestate or AWSTraceHeader: ddbworker's attributes first
// (the failure, the origin, the marks of a redriven or DLQ-copied
// message), then traceparent and tracestate, then the producer's by name.
func TestFitAttributes(t *testing.T) {
	sent := time.UnixMilli(1_790_000_000_000)
	failedAt := time.UnixMilli(1_790_000_100_000).UTC()
	withTrace := func(n int, trace ...string) map[string]types.MessageAttributeValue {
		out := producerAttrs(n)
		if len(trace) > 0 {
			out[tracing.AttrTraceparent] = strAttr(trace[0])
		}
		if len(trace) > 1 {
			out[tracing.AttrTracestate] = strAttr(trace[1])
		}
		return out
	}
	plus := func(a map[string]types.MessageAttributeValue, kv ...string) map[string]types.MessageAttributeValue {
		out := maps.Clone(a)
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = strAttr(kv[i+1])
		}
		return out
	}
	ours := []string{dlq.AttrFailureCode, dlq.AttrFailureMessage, dlq.AttrFailedAt, dlq.AttrSourceMessageID,
		dlq.AttrIdempotencyKey, dlq.AttrMessageType, dlq.AttrFirstSentAt}
	tests := []struct {
		name string
		// copy is "dlq" (the terminal policy's copy) or "resend" (a
		// deferral's).
		copy  string
		attrs map[string]types.MessageAttributeValue
		xray  string // the AWSTraceHeader system attribute
		// message is the failure's message ("": a short one).
		message string
		body    int // bytes; 0: a small body
		limit   int // the DLQ's MaximumMessageSize; 0: 1 MiB
		// needed are the attributes the worker's routes read (its
		// adapters' TypeAttribute).
		needed []string
		want   []string
		wantTP string // the copy's traceparent ("": none)
	}{
		{name: "dlq: 8 attributes, traceparent and tracestate", copy: "dlq", attrs: withTrace(8, testTraceparent, "vendor=1"),
			want: append(slices.Clone(ours), tracing.AttrTraceparent, tracing.AttrTracestate, "p0"), wantTP: testTraceparent},
		{name: "dlq: 9 attributes and AWSTraceHeader", copy: "dlq", attrs: producerAttrs(9), xray: testXRay,
			want: append(slices.Clone(ours), tracing.AttrTraceparent, "p0", "p1"), wantTP: testXRayAsW3C},
		{name: "dlq: 10 attributes", copy: "dlq", attrs: producerAttrs(10),
			want: append(slices.Clone(ours), "p0", "p1", "p2")},
		{name: "dlq: traceparent wins over AWSTraceHeader", copy: "dlq", attrs: withTrace(9, testTraceparent), xray: testXRay,
			want: append(slices.Clone(ours), tracing.AttrTraceparent, "p0", "p1"), wantTP: testTraceparent},
		{name: "dlq: a malformed traceparent yields to AWSTraceHeader", copy: "dlq", attrs: withTrace(8, "00-nonsense"), xray: testXRay,
			want: append(slices.Clone(ours), tracing.AttrTraceparent, "p0", "p1"), wantTP: testXRayAsW3C},
		{name: "dlq: ddbworker's attributes of an earlier copy are replaced, not kept", copy: "dlq",
			attrs: plus(withTrace(7, testTraceparent), dlq.AttrRedrivenFrom, "dlq-1", dlq.AttrFailureCode, "OLD_CODE"),
			want:  append(slices.Clone(ours), tracing.AttrTraceparent, "p0", "p1"), wantTP: testTraceparent},
		// 236 bytes for the 6 attributes above the failure message, 72 for
		// traceparent, 9 for each producer attribute: the message (230)
		// does not fit, traceparent does.
		{name: "dlq: no room for the failure message keeps the trace context", copy: "dlq", attrs: withTrace(8, testTraceparent),
			message: strings.Repeat("m", 200), body: 1000, limit: 1000 + 236 + 72 + 3*9,
			want: []string{dlq.AttrFailureCode, dlq.AttrFailedAt, dlq.AttrSourceMessageID, dlq.AttrIdempotencyKey, dlq.AttrMessageType,
				dlq.AttrFirstSentAt, tracing.AttrTraceparent, "p0", "p1", "p2"}, wantTP: testTraceparent},
		// Without its failure code the copy is not sent (sendToDLQ:
		// errTooLargeForDLQ).
		{name: "dlq: no room for the failure code", copy: "dlq", attrs: producerAttrs(1), body: 1000, limit: 1000 + 10, want: []string{"p0"}},
		// Issue 21: an adapter's TypeAttribute ("p9", last by name) is
		// kept right after ddbworker's control attributes; the
		// informational ones, the trace context and the producer's
		// other attributes yield to it.
		{name: "dlq: 10 attributes, the last by name a route's type attribute", copy: "dlq", attrs: producerAttrs(10), needed: []string{"p9"},
			want: append(slices.Clone(ours), "p9", "p0", "p1")},
		{name: "dlq: 9 attributes and traceparent, the last by name a route's type attribute", copy: "dlq",
			attrs: withTrace(9, testTraceparent), needed: []string{"p8", "absent"},
			want: append(slices.Clone(ours), "p8", tracing.AttrTraceparent, "p0"), wantTP: testTraceparent},
		{name: "dlq: a route's type attribute outranks the failure message when room is short", copy: "dlq", attrs: producerAttrs(2),
			needed: []string{"p1"}, message: strings.Repeat("m", 200), body: 1000, limit: 1000 + 236 + 9,
			want: []string{dlq.AttrFailureCode, dlq.AttrFailedAt, dlq.AttrSourceMessageID, dlq.AttrIdempotencyKey, dlq.AttrMessageType,
				dlq.AttrFirstSentAt, "p1"}},
		{name: "resend: 10 attributes, the last by name a route's type attribute", copy: "resend", attrs: producerAttrs(10), needed: []string{"p9"},
			want: []string{dlq.AttrFirstSentAt, "p9", "p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"}},
		{name: "resend: a redriven DLQ copy with 10 attributes keeps both marks and the type attribute", copy: "resend",
			attrs:  plus(withTrace(7, testTraceparent), dlq.AttrRedrivenFrom, "dlq-1", dlq.AttrFailureCode, "CASE_NOT_FOUND"),
			needed: []string{"p6"},
			want: []string{dlq.AttrFailureCode, dlq.AttrRedrivenFrom, dlq.AttrFirstSentAt, "p6", tracing.AttrTraceparent,
				"p0", "p1", "p2", "p3", "p4"}, wantTP: testTraceparent},
		{name: "resend: fitted to the work queue's MaximumMessageSize", copy: "resend", attrs: producerAttrs(3), body: 1000,
			limit: 1000 + 41 + 9, want: []string{dlq.AttrFirstSentAt, "p0"}},
		{name: "resend: 8 attributes, traceparent and tracestate", copy: "resend", attrs: withTrace(8, testTraceparent, "vendor=1"),
			want:   []string{dlq.AttrFirstSentAt, tracing.AttrTraceparent, tracing.AttrTracestate, "p0", "p1", "p2", "p3", "p4", "p5", "p6"},
			wantTP: testTraceparent},
		{name: "resend: a redriven message with 8 attributes and AWSTraceHeader keeps its mark", copy: "resend",
			attrs: plus(producerAttrs(8), dlq.AttrRedrivenFrom, "dlq-1"), xray: testXRay,
			want:   []string{dlq.AttrFirstSentAt, dlq.AttrRedrivenFrom, tracing.AttrTraceparent, "p0", "p1", "p2", "p3", "p4", "p5", "p6"},
			wantTP: testXRayAsW3C},
		{name: "resend: a DLQ copy moved back with 10 attributes keeps its failure code", copy: "resend",
			attrs:  plus(withTrace(7, testTraceparent), dlq.AttrFailureCode, "CASE_NOT_FOUND", dlq.AttrSourceMessageID, "m-0"),
			want:   []string{dlq.AttrFailureCode, dlq.AttrFirstSentAt, tracing.AttrTraceparent, "p0", "p1", "p2", "p3", "p4", "p5", "p6"},
			wantTP: testTraceparent},
		{name: "resend: a redriven DLQ copy with 10 attributes keeps both marks", copy: "resend",
			attrs: plus(withTrace(6, testTraceparent, "vendor=1"), dlq.AttrRedrivenFrom, "dlq-1", dlq.AttrFailureCode, "CASE_NOT_FOUND"),
			want: []string{dlq.AttrFailureCode, dlq.AttrRedrivenFrom, dlq.AttrFirstSentAt, tracing.AttrTraceparent, tracing.AttrTracestate,
				"p0", "p1", "p2", "p3", "p4"}, wantTP: testTraceparent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.LessOrEqual(t, len(tt.attrs), sqsbatch.MaxAttributes, "a message SQS accepts")
			m := types.Message{MessageId: aws.String("m-1"), Body: aws.String(strings.Repeat("b", max(tt.body, 10))), MessageAttributes: tt.attrs,
				Attributes: map[string]string{string(types.MessageSystemAttributeNameSentTimestamp): strconv.FormatInt(sent.UnixMilli(), 10)}}
			if tt.xray != "" {
				m.Attributes[tracing.SystemAttrAWSTraceHeader] = tt.xray
			}
			d := newDelivery(m, time.Now())
			var got map[string]types.MessageAttributeValue
			switch tt.copy {
			case "dlq":
				w := &Worker{cfg: Config{Now: func() time.Time { return failedAt }}, needed: tt.needed,
					queue: queueFacts{maxBytes: maxMessageBytes, dlqMaxBytes: cmp.Or(tt.limit, maxMessageBytes)}}
				wk := &work{env: &envelope.Envelope{IdempotencyKey: "k-1", MessageType: "case.deadline"}}
				fit := w.dlqAttributes(d, wk, failure.NewTerminal("CASE_NOT_FOUND", cmp.Or(tt.message, "the case is gone")))
				got = fit.attrs
				require.Empty(t, fit.needed, "no attribute a route reads is dropped")
			case "resend":
				w := &Worker{needed: tt.needed, queue: queueFacts{maxBytes: cmp.Or(tt.limit, maxMessageBytes)}}
				fit := w.resendAttributes(d)
				got = fit.attrs
				require.Empty(t, fit.needed, "no attribute a route reads is dropped")
			}
			require.ElementsMatch(t, tt.want, names(got))
			require.LessOrEqual(t, len(got), sqsbatch.MaxAttributes)
			require.LessOrEqual(t, sqsbatch.MessageSize(aws.ToString(m.Body), got), cmp.Or(tt.limit, maxMessageBytes))
			require.Equal(t, tt.wantTP, strValue(got, tracing.AttrTraceparent))
			if _, ok := got[dlq.AttrFirstSentAt]; ok {
				require.Equal(t, strconv.FormatInt(sent.UnixMilli(), 10), strValue(got, dlq.AttrFirstSentAt))
			}
			if _, ok := got[dlq.AttrFailureCode]; ok && tt.copy == "dlq" {
				require.Equal(t, "CASE_NOT_FOUND", strValue(got, dlq.AttrFailureCode), "the copy's own failure, not an earlier copy's")
				require.Equal(t, "m-1", strValue(got, dlq.AttrSourceMessageID))
				require.Equal(t, inbox.FormatTime(failedAt), strValue(got, dlq.AttrFailedAt))
			}
			for _, mark := range []string{dlq.AttrRedrivenFrom, dlq.AttrFailureCode} {
				if _, ok := tt.attrs[mark]; ok && tt.copy == "resend" {
					require.Equal(t, strValue(tt.attrs, mark), strValue(got, mark), "the re-send keeps the mark %s", mark)
				}
			}
		})
	}
}

// A message the DLQ tooling redrove or copied never takes a single-write
// route's fresh path, nor claims by its commit (it would bypass the failure recorded for its work),
// and neither does a deferral's re-send of it, however many attributes of
// its own it carries.
func TestResendKeepsItOffTheFreshPath(t *testing.T) {
	wk := &work{route: ddbworker.Route{SingleWrite: true}, env: &envelope.Envelope{IdempotencyKey: "k-1"}}
	fresh := func(attrs map[string]types.MessageAttributeValue, xray string) bool {
		m := types.Message{MessageId: aws.String("m"), Body: aws.String("{}"), MessageAttributes: attrs,
			Attributes: map[string]string{string(types.MessageSystemAttributeNameApproximateReceiveCount): "1",
				string(types.MessageSystemAttributeNameSentTimestamp): "1790000000000", tracing.SystemAttrAWSTraceHeader: xray}}
		return claimsByCommit(newDelivery(m, time.Now()), wk)
	}
	for _, tt := range []struct {
		name  string
		attrs map[string]types.MessageAttributeValue
		fresh bool
	}{
		{"a producer's message", producerAttrs(9), true},
		{"redriven", func() map[string]types.MessageAttributeValue {
			a := producerAttrs(8)
			a[dlq.AttrRedrivenFrom] = strAttr("dlq-1")
			return a
		}(), false},
		{"copied from the DLQ", func() map[string]types.MessageAttributeValue {
			a := producerAttrs(9)
			a[dlq.AttrFailureCode] = strAttr("CASE_NOT_FOUND")
			return a
		}(), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.fresh, fresh(tt.attrs, testXRay))
			m := types.Message{MessageId: aws.String("m"), Body: aws.String("{}"), MessageAttributes: tt.attrs,
				Attributes: map[string]string{string(types.MessageSystemAttributeNameSentTimestamp): "1790000000000",
					tracing.SystemAttrAWSTraceHeader: testXRay}}
			copied := (&Worker{queue: queueFacts{maxBytes: maxMessageBytes}}).resendAttributes(newDelivery(m, time.Now())).attrs
			require.Len(t, copied, sqsbatch.MaxAttributes, "a full copy")
			require.Equal(t, tt.fresh, fresh(copied, ""), "the re-send is judged as the message was")
		})
	}
}

// Issue 21: a copy that must drop attributes says which — a warning naming
// them, the message and the copy, and ddbworker_copy_attributes_dropped_total
// — and a copy that cannot carry an attribute a route reads to take the
// message (an adapter's TypeAttribute) is not made: the DLQ copy yields to
// the redrive policy (errTooLargeForDLQ), which moves the message with
// every attribute, and the re-send fails (its caller keeps the message).
func TestCopiesSayWhatTheyDrop(t *testing.T) {
	sent := time.UnixMilli(1_790_000_000_000)
	delivery := func(attrs map[string]types.MessageAttributeValue, body int) *delivery {
		return newDelivery(types.Message{MessageId: aws.String("m-1"), Body: aws.String(strings.Repeat("b", body)), MessageAttributes: attrs,
			Attributes: map[string]string{string(types.MessageSystemAttributeNameSentTimestamp): strconv.FormatInt(sent.UnixMilli(), 10)}}, time.Now())
	}
	withType := func(n int, value string) map[string]types.MessageAttributeValue {
		a := producerAttrs(n)
		a["zType"] = strAttr(value)
		return a
	}
	t.Run("dropped attributes are logged and counted", func(t *testing.T) {
		for _, tt := range []struct {
			copy    string
			dropped []string
		}{{copyDLQ, []string{"p3", "p4"}}, {copyResend, []string{"ddbworker.failureMessage"}}, {copyResend, nil}} {
			var logs bytes.Buffer
			m := metricstest.New()
			w := &Worker{log: slog.New(slog.NewJSONHandler(&logs, nil)), metrics: newInstruments(m)}
			w.droppedAttributes(context.Background(), delivery(nil, 10), tt.copy, tt.dropped)
			require.Equal(t, float64(len(tt.dropped)), m.Value("ddbworker_copy_attributes_dropped_total", tt.copy))
			if len(tt.dropped) == 0 {
				require.Empty(t, logs.String(), "nothing dropped, nothing said")
				continue
			}
			var line struct {
				Level, Msg, SqsMessageID, Copy string
				DroppedAttributes              []string
			}
			require.NoError(t, json.Unmarshal(logs.Bytes(), &line), logs.String())
			require.Equal(t, "WARN", line.Level)
			require.Equal(t, "m-1", line.SqsMessageID)
			require.Equal(t, tt.copy, line.Copy)
			require.Equal(t, tt.dropped, line.DroppedAttributes)
		}
	})
	// 1000 bytes of body; the DLQ (and the work queue) take 1,200: the
	// failure code and firstSentAt fit, a 300-byte type attribute does
	// not.
	w := &Worker{cfg: Config{Now: time.Now}, needed: []string{"zType"}, queue: queueFacts{maxBytes: 1200, dlqMaxBytes: 1200}}
	d := delivery(withType(3, strings.Repeat("t", 300)), 1000)
	wk := &work{env: &envelope.Envelope{IdempotencyKey: "k-1", MessageType: "Order"}}
	t.Run("the DLQ copy", func(t *testing.T) {
		fit := w.dlqAttributes(d, wk, failure.NewTerminal("CASE_NOT_FOUND", "gone"))
		require.Equal(t, []string{"zType"}, fit.needed)
		require.Contains(t, fit.dropped, "zType")
		err := w.sendToDLQ(context.Background(), d, wk, failure.NewTerminal("CASE_NOT_FOUND", "gone")) // no SQS: it must not send
		require.ErrorIs(t, err, errTooLargeForDLQ)
		require.ErrorContains(t, err, "cannot carry zType")
	})
	t.Run("the re-send", func(t *testing.T) {
		fit := w.resendAttributes(d)
		require.Equal(t, []string{"zType"}, fit.needed)
		err := w.resend(context.Background(), d, time.Minute) // no SQS: it must not send
		require.ErrorContains(t, err, "cannot carry zType")
	})
	t.Run("room for it", func(t *testing.T) {
		d := delivery(withType(9, "Order"), 1000)
		for _, fit := range []fitted{w.dlqAttributes(d, wk, failure.NewTerminal("CASE_NOT_FOUND", "gone")), w.resendAttributes(d)} {
			require.Empty(t, fit.needed)
			require.Contains(t, fit.attrs, "zType")
			require.Equal(t, "Order", strValue(fit.attrs, "zType"))
			require.NotEmpty(t, fit.dropped)
			require.NotContains(t, fit.dropped, "zType")
		}
	})
}
