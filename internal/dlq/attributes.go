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

// controlRanked are ddbworker's control attributes, highest precedence
// first (attributeRank).
var controlRanked = []string{AttrFailureCode, AttrRedrivenFrom, AttrResentFrom, AttrFirstSentAt, AttrHeldLease}

// infoRanked are ddbworker's other attributes, what a DLQ reader needs,
// highest precedence first: the failure message, the longest, last.
var infoRanked = []string{AttrSourceMessageID, AttrMessageType, AttrIdempotencyKey, AttrFailedAt, AttrFailureMessage}

// traceRanked is the trace context, traceparent first.
var traceRanked = []string{tracing.AttrTraceparent, tracing.AttrTracestate}

// Groups of attributeRank, highest precedence first.
const (
	rankNeeded = iota
	rankControl
	rankInfo
	rankTrace
	rankProducer
)

// attributeRank is the precedence of a message attribute on a copy of the
// message — the worker's DLQ copy, its re-send of a deferred or parked
// message, Redrive's copy to the work queue —, the order in which a copy
// keeps them when SQS's limits cannot carry them all (the one ranking of
// every copy ddbworker makes, documented for producers in
// docs/producers.md, "The 10-attribute budget"):
//
//  1. the needed attributes, by name: those a route reads to take the
//     message (an adapter's TypeAttribute; for Redrive, every attribute
//     of its producer's the DLQ message carried, since the tooling does
//     not know the routes). Without one the copy cannot be read at all
//     (MISSING_FIELD messageType), so they outrank everything;
//  2. ddbworker's control attributes, which the worker decides by:
//     AttrFailureCode, AttrRedrivenFrom and AttrResentFrom mark a message
//     the DLQ tooling copied or moved, or the worker re-sent, which then
//     claims its work through the gate instead of by its commit (a hint
//     on every route whose commit checks the record — the default,
//     fused and single-write alike —, and what a SkipInboxCheck route
//     relies on); then AttrFirstSentAt, by which the replay window and
//     Redrive's MaxAge judge the work's age;
//  3. ddbworker's other attributes, what a DLQ reader needs:
//     AttrSourceMessageID, AttrMessageType, AttrIdempotencyKey,
//     AttrFailedAt, AttrFailureMessage (the longest last), then any other
//     ddbworker.* attribute by name;
//  4. the trace context: traceparent, then tracestate;
//  5. the producer's other attributes, by name.
func attributeRank(name string, needed []string) (group, index int) {
	if slices.Contains(needed, name) {
		return rankNeeded, 0
	}
	if i := slices.Index(controlRanked, name); i >= 0 {
		return rankControl, i
	}
	if i := slices.Index(infoRanked, name); i >= 0 {
		return rankInfo, i
	}
	if strings.HasPrefix(name, AttrPrefix) {
		return rankInfo, len(infoRanked)
	}
	if i := slices.Index(traceRanked, name); i >= 0 {
		return rankTrace, i
	}
	return rankProducer, 0
}

// fitAttributes is FitAttributesFor with no needed attributes.
func fitAttributes(body string, candidates map[string]types.MessageAttributeValue, limit int) (attrs map[string]types.MessageAttributeValue, dropped []string) {
	attrs, dropped, _ = FitAttributesFor(body, candidates, nil, limit)
	return attrs, dropped
}

// FitAttributesFor chooses the attributes a copy of a message carries
// among candidates, whose body is body: each in the order of precedence
// of ddbworker's copies (the needed attributes, ddbworker's control
// attributes, ddbworker's other attributes, the trace context, the
// producer's attributes; see docs/producers.md, "The 10-attribute
// budget"), kept while the copy stays within SQS's limit of
// sqsbatch.MaxAttributes attributes and, with the body, within limit bytes
// as SQS counts them (sqsbatch.MessageSize). An attribute too large for
// the room left is dropped and the next ones are still tried.
//
// needed names the attributes a route reads to take the message (an
// adapter's TypeAttribute; for Redrive, every attribute the DLQ message
// carried of its producer's): a copy without one could not be read again.
// dropped names the candidates not kept, in that order, and droppedNeeded
// those of them that are needed; attrs is never nil. The worker's DLQ
// copies and re-sends use it, and Redrive: one ranking for every copy
// ddbworker makes.
func FitAttributesFor(body string, candidates map[string]types.MessageAttributeValue, needed []string, limit int) (
	attrs map[string]types.MessageAttributeValue, dropped, droppedNeeded []string) {
	attrs = make(map[string]types.MessageAttributeValue, min(len(candidates), sqsbatch.MaxAttributes))
	size := len(body)
	compare := func(a, b string) int {
		ga, ia := attributeRank(a, needed)
		gb, ib := attributeRank(b, needed)
		return cmp.Or(cmp.Compare(ga, gb), cmp.Compare(ia, ib), strings.Compare(a, b))
	}
	for _, k := range slices.SortedFunc(maps.Keys(candidates), compare) {
		v := candidates[k]
		n := sqsbatch.AttributeSize(k, v)
		if len(attrs) >= sqsbatch.MaxAttributes || size+n > limit {
			dropped = append(dropped, k)
			if g, _ := attributeRank(k, needed); g == rankNeeded {
				droppedNeeded = append(droppedNeeded, k)
			}
			continue
		}
		attrs[k] = v
		size += n
	}
	return attrs, dropped, droppedNeeded
}
