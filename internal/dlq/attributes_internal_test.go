package dlq

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/sqsbatch"
	"github.com/ddbworker/ddbworker/tracing"
)

func strAttr(s string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
}

// producerAttrs are n producer attributes p0…p<n-1>, by name in that
// order, plus extra name-value pairs.
func producerAttrs(n int, extra ...string) map[string]types.MessageAttributeValue {
	out := map[string]types.MessageAttributeValue{}
	for i := range n {
		out[fmt.Sprintf("p%d", i)] = strAttr("v")
	}
	for i := 0; i < len(extra); i += 2 {
		out[extra[i]] = strAttr(extra[i+1])
	}
	return out
}

// One ranking for every copy: ddbworker's control attributes, the needed
// attributes (those a route reads to take the message: issue 21), its
// other attributes, the trace context, the producer's by name — each kept
// while the copy stays within 10 attributes and the size limit; a large
// one that does not fit lets smaller ones after it in. The dropped are
// named in that order, the needed among them apart.
func TestFitAttributes(t *testing.T) {
	all := producerAttrs(3, AttrFailureCode, "C", AttrRedrivenFrom, "d-1", AttrFirstSentAt, "1", AttrSourceMessageID, "s-1",
		AttrMessageType, "T", AttrIdempotencyKey, "k", AttrFailedAt, "t", AttrFailureMessage, "m", "ddbworker.other", "o",
		tracing.AttrTraceparent, "tp", tracing.AttrTracestate, "ts")
	order := []string{AttrFailureCode, AttrRedrivenFrom, AttrFirstSentAt, AttrSourceMessageID, AttrMessageType, AttrIdempotencyKey,
		AttrFailedAt, AttrFailureMessage, "ddbworker.other", tracing.AttrTraceparent, tracing.AttrTracestate, "p0", "p1", "p2"}
	for _, tt := range []struct {
		name       string
		candidates map[string]types.MessageAttributeValue
		body       string
		limit      int
		needed     []string
		kept       []string
		dropped    []string
		// droppedNeeded are the needed among dropped.
		droppedNeeded []string
	}{
		{name: "the precedence, cut at 10", candidates: all, limit: sqsbatch.MaxMessageBytes, kept: order[:10], dropped: order[10:]},
		{name: "all fit", candidates: producerAttrs(2, AttrRedrivenFrom, "d-1", tracing.AttrTraceparent, "tp"), limit: sqsbatch.MaxMessageBytes,
			kept: []string{AttrRedrivenFrom, tracing.AttrTraceparent, "p0", "p1"}},
		{name: "a large attribute that does not fit lets the smaller ones after it in",
			candidates: producerAttrs(2, AttrFailureCode, "C", AttrFailureMessage, strings.Repeat("m", 500), tracing.AttrTraceparent, "tp"),
			body:       strings.Repeat("b", 1000), limit: 1000 + 200,
			kept: []string{AttrFailureCode, tracing.AttrTraceparent, "p0", "p1"}, dropped: []string{AttrFailureMessage}},
		{name: "nothing fits", candidates: producerAttrs(1, AttrRedrivenFrom, "d-1"), body: "bb", limit: 2,
			dropped: []string{AttrRedrivenFrom, "p0"}},
		{name: "a needed attribute right after the controls", candidates: all, limit: sqsbatch.MaxMessageBytes, needed: []string{"p2"},
			kept:    []string{AttrFailureCode, AttrRedrivenFrom, AttrFirstSentAt, "p2", AttrSourceMessageID, AttrMessageType, AttrIdempotencyKey, AttrFailedAt, AttrFailureMessage, "ddbworker.other"},
			dropped: []string{tracing.AttrTraceparent, tracing.AttrTracestate, "p0", "p1"}},
		{name: "needed attributes by name; a needed name absent is no candidate", candidates: all, limit: sqsbatch.MaxMessageBytes,
			needed:  []string{"p2", "absent", "p1"},
			kept:    []string{AttrFailureCode, AttrRedrivenFrom, AttrFirstSentAt, "p1", "p2", AttrSourceMessageID, AttrMessageType, AttrIdempotencyKey, AttrFailedAt, AttrFailureMessage},
			dropped: []string{"ddbworker.other", tracing.AttrTraceparent, tracing.AttrTracestate, "p0"}},
		{name: "a needed trace attribute ranks as needed", candidates: producerAttrs(9, tracing.AttrTraceparent, "tp", AttrFailureCode, "C"),
			limit: sqsbatch.MaxMessageBytes, needed: []string{tracing.AttrTraceparent},
			kept:    []string{AttrFailureCode, tracing.AttrTraceparent, "p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"},
			dropped: []string{"p8"}},
		{name: "a needed control attribute ranks as needed", candidates: producerAttrs(1, AttrFailureCode, "C", AttrFirstSentAt, "1"),
			limit: sqsbatch.MaxMessageBytes, needed: []string{AttrFirstSentAt, "p0"},
			kept: []string{AttrFailureCode, AttrFirstSentAt, "p0"}},
		// The needed attribute does not fit beside the controls: it is
		// dropped and said to be, and the smaller attributes after it go in.
		{name: "a needed attribute too large for the room left is named",
			candidates: producerAttrs(1, AttrFailureCode, "C", "zType", strings.Repeat("t", 300), AttrMessageType, "T"),
			body:       strings.Repeat("b", 1000), limit: 1000 + 200, needed: []string{"zType"},
			kept: []string{AttrFailureCode, AttrMessageType, "p0"}, dropped: []string{"zType"}, droppedNeeded: []string{"zType"}},
		// Needed attributes outrank even the controls: a copy that cannot
		// be read is worse than one that claims through its commit, which
		// checks the work's record on every route but SkipInboxCheck's.
		{name: "needed attributes past 10 are named", candidates: producerAttrs(12, AttrFailureCode, "C"), limit: sqsbatch.MaxMessageBytes,
			needed:  []string{"p0", "p1", "p10", "p11", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"},
			kept:    []string{"p0", "p1", "p10", "p11", "p2", "p3", "p4", "p5", "p6", "p7"},
			dropped: []string{"p8", "p9", AttrFailureCode}, droppedNeeded: []string{"p8", "p9"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kept, dropped, droppedNeeded := FitAttributesFor(tt.body, tt.candidates, tt.needed, tt.limit)
			require.Equal(t, tt.droppedNeeded, droppedNeeded)
			if tt.needed == nil {
				k, d := fitAttributes(tt.body, tt.candidates, tt.limit)
				require.Equal(t, kept, k, "fitAttributes is FitAttributesFor without needed attributes")
				require.Equal(t, dropped, d)
			}
			require.NotNil(t, kept)
			require.ElementsMatch(t, tt.kept, slices.Collect(maps.Keys(kept)))
			require.Equal(t, tt.dropped, dropped, "in order of precedence")
			require.LessOrEqual(t, sqsbatch.MessageSize(tt.body, kept), tt.limit)
			for k, v := range kept {
				require.Equal(t, tt.candidates[k], v)
			}
		})
	}
}

// Redrive's copy of a message that already carries 8 to 10 attributes of
// its own, with its trace context as traceparent/tracestate or
// AWSTraceHeader (converted to traceparent: one attribute more): the copy
// keeps ddbworker.redrivenFrom — the mark that keeps the redriven message
// off a single-write route's fresh path — and firstSentAt, then every
// other attribute of the producer's it can (a route may read any of them,
// an adapter's TypeAttribute: issue 21), then the trace context; it sheds
// the trace context first, then the producer's last attributes by name.
func TestCopyAttributes(t *testing.T) {
	const (
		tp   = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		xray = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
		// xrayTP is xray as a traceparent.
		xrayTP = "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
	)
	first := time.UnixMilli(1_790_000_000_000).UTC()
	worker := func(attrs map[string]types.MessageAttributeValue) map[string]types.MessageAttributeValue {
		// What the worker's DLQ copy adds (7 attributes), which Redrive
		// strips.
		out := maps.Clone(attrs)
		for k, v := range producerAttrs(0, AttrFailureCode, "C", AttrFailureMessage, "m", AttrFailedAt, "t", AttrSourceMessageID, "s",
			AttrMessageType, "T", AttrIdempotencyKey, "k", AttrFirstSentAt, "1790000000000") {
			out[k] = v
		}
		return out
	}
	for _, tt := range []struct {
		name          string
		attrs         map[string]types.MessageAttributeValue
		drop          []string
		xray          string
		noFirst       bool
		kept          []string
		dropped       []string
		droppedNeeded []string
		tp            string
	}{
		{name: "7 attributes and AWSTraceHeader", attrs: producerAttrs(7), xray: xray,
			kept: []string{AttrRedrivenFrom, AttrFirstSentAt, "p0", "p1", "p2", "p3", "p4", "p5", "p6", tracing.AttrTraceparent}, tp: xrayTP},
		{name: "8 attributes and AWSTraceHeader", attrs: producerAttrs(8), xray: xray,
			kept:    []string{AttrRedrivenFrom, AttrFirstSentAt, "p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"},
			dropped: []string{tracing.AttrTraceparent}},
		// The producer's attributes and the work's age outrank the copy's
		// mark (seed 19 of the explorer: a route's type attribute dropped
		// for the mark); a copy that cannot carry them all is refused
		// (droppedNeeded), unless the operator names what to leave out.
		{name: "9 attributes and AWSTraceHeader", attrs: producerAttrs(9), xray: xray,
			kept:    []string{AttrFirstSentAt, "p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8"},
			dropped: []string{AttrRedrivenFrom, tracing.AttrTraceparent}},
		{name: "10 attributes and AWSTraceHeader: refused", attrs: producerAttrs(10), xray: xray,
			kept:          []string{AttrFirstSentAt, "p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8"},
			dropped:       []string{"p9", AttrRedrivenFrom, tracing.AttrTraceparent},
			droppedNeeded: []string{"p9"}},
		{name: "10 attributes, one left out by name", attrs: producerAttrs(10), xray: xray, drop: []string{"p3", "absent"},
			kept:    []string{AttrFirstSentAt, "p0", "p1", "p2", "p4", "p5", "p6", "p7", "p8", "p9"},
			dropped: []string{"p3", AttrRedrivenFrom, tracing.AttrTraceparent}},
		{name: "6 attributes, traceparent and tracestate", attrs: producerAttrs(6, tracing.AttrTraceparent, tp, tracing.AttrTracestate, "v=1"),
			kept: []string{AttrRedrivenFrom, AttrFirstSentAt, "p0", "p1", "p2", "p3", "p4", "p5", tracing.AttrTraceparent, tracing.AttrTracestate},
			tp:   tp},
		{name: "8 attributes, traceparent and tracestate", attrs: producerAttrs(8, tracing.AttrTraceparent, tp, tracing.AttrTracestate, "v=1"),
			kept:    []string{AttrRedrivenFrom, AttrFirstSentAt, "p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"},
			dropped: []string{tracing.AttrTraceparent, tracing.AttrTracestate}},
		{name: "7 attributes and traceparent, AWSTraceHeader too", attrs: producerAttrs(7, tracing.AttrTraceparent, tp), xray: xray,
			kept: []string{AttrRedrivenFrom, AttrFirstSentAt, "p0", "p1", "p2", "p3", "p4", "p5", "p6", tracing.AttrTraceparent}, tp: tp},
		{name: "a routing attribute last by name is kept over the trace context", attrs: producerAttrs(7, "zType", "Order"), xray: xray,
			kept:    []string{AttrRedrivenFrom, AttrFirstSentAt, "p0", "p1", "p2", "p3", "p4", "p5", "p6", "zType"},
			dropped: []string{tracing.AttrTraceparent}},
		{name: "the worker's copy: its attributes stripped, 3 of the producer's", attrs: worker(producerAttrs(2, tracing.AttrTraceparent, tp)),
			kept: []string{AttrRedrivenFrom, AttrFirstSentAt, tracing.AttrTraceparent, "p0", "p1"}, tp: tp},
		{name: "a malformed traceparent is not copied", attrs: producerAttrs(8, tracing.AttrTraceparent, "00-nonsense"),
			kept:    []string{AttrRedrivenFrom, AttrFirstSentAt, "p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"},
			dropped: nil},
		{name: "no first send known", attrs: producerAttrs(9), xray: xray, noFirst: true,
			kept:    []string{AttrRedrivenFrom, "p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8"},
			dropped: []string{tracing.AttrTraceparent}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.LessOrEqual(t, len(tt.attrs), sqsbatch.MaxAttributes, "a message SQS accepts")
			m := Message{ID: "dlq-1", Body: `{"messageType":"T"}`, Attributes: tt.attrs, AWSTraceHeader: tt.xray, FirstSentAt: first}
			if tt.noFirst {
				m.FirstSentAt = time.Time{}
			}
			attrs, dropped, droppedNeeded := copyAttributes(&m, tt.drop)
			require.ElementsMatch(t, tt.kept, slices.Collect(maps.Keys(attrs)))
			require.Equal(t, tt.dropped, dropped)
			require.Equal(t, tt.droppedNeeded, droppedNeeded)
			if !slices.Contains(tt.dropped, AttrRedrivenFrom) {
				require.Equal(t, "dlq-1", aws.ToString(attrs[AttrRedrivenFrom].StringValue), "the mark, where it fits")
			}
			require.Equal(t, tt.tp, aws.ToString(attrs[tracing.AttrTraceparent].StringValue))
			if !tt.noFirst && !slices.Contains(tt.dropped, AttrFirstSentAt) {
				require.Equal(t, "1790000000000", aws.ToString(attrs[AttrFirstSentAt].StringValue))
			}
		})
	}
}
