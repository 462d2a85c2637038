package dlq

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker/internal/sqsbatch"
	"github.com/ddbworker/ddbworker/tracing"
)

// ranked are ddbworker's attributes, highest precedence first: its
// control attributes, then what a DLQ reader needs (attributeRank).
var ranked = []string{
	AttrFailureCode, AttrRedrivenFrom, AttrResentFrom, AttrFirstSentAt,
	AttrSourceMessageID, AttrMessageType, AttrIdempotencyKey, AttrFailedAt, AttrFailureMessage,
}

// traceRanked is the trace context, traceparent first.
var traceRanked = []string{tracing.AttrTraceparent, tracing.AttrTracestate}

// attributeRank is the precedence of a message attribute on a copy of the
// message — the worker's DLQ copy, its re-send of a deferred message,
// Redrive's copy to the work queue —, the order in which a copy keeps
// them when SQS's limits cannot carry them all (the one ranking of every
// copy ddbworker makes, documented for producers in docs/producers.md,
// "The 10-attribute budget"):
//
//  1. ddbworker's control attributes, which the worker decides by:
//     AttrFailureCode, AttrRedrivenFrom and AttrResentFrom mark a message
//     the DLQ tooling copied or moved, or the worker re-sent, which must
//     never claim its work by its commit (a single-write route's fresh path
//     would bypass the record its work may have); then
//     AttrFirstSentAt, by which the replay window and Redrive's MaxAge
//     judge the work's age;
//  2. ddbworker's other attributes, what a DLQ reader needs:
//     AttrSourceMessageID, AttrMessageType, AttrIdempotencyKey,
//     AttrFailedAt, AttrFailureMessage (the longest last), then any other
//     ddbworker.* attribute by name;
//  3. the trace context: traceparent, then tracestate;
//  4. the producer's attributes, by name.
func attributeRank(name string) (group, index int) {
	if i := slices.Index(ranked, name); i >= 0 {
		return 0, i
	}
	if strings.HasPrefix(name, AttrPrefix) {
		return 1, 0
	}
	if i := slices.Index(traceRanked, name); i >= 0 {
		return 2, i
	}
	return 3, 0
}

// compareAttributes orders attribute names by attributeRank, then by name.
func compareAttributes(a, b string) int {
	ga, ia := attributeRank(a)
	gb, ib := attributeRank(b)
	return cmp.Or(cmp.Compare(ga, gb), cmp.Compare(ia, ib), strings.Compare(a, b))
}

// FitAttributes chooses the attributes a copy of a message carries among
// candidates, whose body is body: each in the order of precedence of
// ddbworker's copies (ddbworker's control attributes, its other
// attributes, the trace context, the producer's attributes; see
// docs/producers.md, "The 10-attribute budget"), kept while the copy
// stays within SQS's limit of sqsbatch.MaxAttributes attributes and, with
// the body, within limit bytes as SQS counts them (sqsbatch.MessageSize).
// An attribute too large for the room left is dropped and the next ones
// are still tried. dropped names the candidates not kept, in that order;
// attrs is never nil. The worker's DLQ copies and deferral re-sends use
// it, and Redrive: one ranking for every copy ddbworker makes.
func FitAttributes(body string, candidates map[string]types.MessageAttributeValue, limit int) (attrs map[string]types.MessageAttributeValue, dropped []string) {
	attrs = make(map[string]types.MessageAttributeValue, min(len(candidates), sqsbatch.MaxAttributes))
	size := len(body)
	for _, k := range slices.SortedFunc(maps.Keys(candidates), compareAttributes) {
		v := candidates[k]
		n := sqsbatch.AttributeSize(k, v)
		if len(attrs) >= sqsbatch.MaxAttributes || size+n > limit {
			dropped = append(dropped, k)
			continue
		}
		attrs[k] = v
		size += n
	}
	return attrs, dropped
}
