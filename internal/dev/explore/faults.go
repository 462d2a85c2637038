package explore

import (
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/attr"
	"github.com/ddbworker/ddbworker/internal/faults"
)

// classify names the call kind of an SDK call's input: which step of the
// protocol it is, read from the item it touches and the attributes it
// sets ("" when it is none the explorer aims at).
func classify(input any, dlqURL string) string {
	switch in := input.(type) {
	case *dynamodb.PutItemInput:
		return itemCall(in.Item["PK"], CallGate)
	case *dynamodb.UpdateItemInput:
		switch c := itemCall(in.Key["PK"], ""); c {
		case "":
			return inboxUpdate(in.ExpressionAttributeNames)
		default:
			return c
		}
	case *dynamodb.TransactWriteItemsInput:
		return CallCommit
	case *dynamodb.GetItemInput:
		return CallEffect
	case *sqs.SendMessageInput:
		if aws.ToString(in.QueueUrl) == dlqURL {
			return CallDLQSend
		}
		return CallResend
	case *sqs.DeleteMessageBatchInput, *sqs.DeleteMessageInput:
		return CallDelete
	case *sqs.ChangeMessageVisibilityInput, *sqs.ChangeMessageVisibilityBatchInput:
		return CallVisibility
	case *sqs.ReceiveMessageInput:
		return CallReceive
	}
	return ""
}

// itemCall is the call kind of a write to the item whose partition key is
// pk: inbox (inboxCall), the effect log, or the domain (a fenced write).
func itemCall(pk ddbtypes.AttributeValue, inboxCall string) string {
	s, _ := pk.(*ddbtypes.AttributeValueMemberS)
	switch {
	case s == nil:
		return CallFenced
	case strings.HasPrefix(s.Value, inbox.PK("")):
		return inboxCall
	case strings.HasPrefix(s.Value, "EFFECT#"):
		return CallEffect
	}
	return CallFenced
}

// inboxUpdate names an UpdateItem of an inbox record by the attributes it
// names (inbox/transition.go): a takeover sets startedAt, a recorded
// failure failedAt, a release failureCode alone, a renewal only the
// lease's end.
func inboxUpdate(names map[string]string) string {
	has := map[string]bool{}
	for _, n := range names {
		has[n] = true
	}
	switch {
	case has[attr.StartedAt]:
		return CallTakeover
	case has[attr.FailedAt]:
		return CallFailure
	case has[attr.FailureCode]:
		return CallRelease
	case has[attr.LeaseExpiresAt]:
		return CallRenewal
	}
	return "inbox"
}

// touches reports whether input writes the aggregate agg's item.
func touches(input any, agg string) bool {
	pk := aggPrefix + agg
	is := func(v ddbtypes.AttributeValue) bool {
		s, ok := v.(*ddbtypes.AttributeValueMemberS)
		return ok && s.Value == pk
	}
	switch in := input.(type) {
	case *dynamodb.PutItemInput:
		return is(in.Item["PK"])
	case *dynamodb.UpdateItemInput:
		return is(in.Key["PK"])
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range in.TransactItems {
			switch {
			case it.Update != nil && is(it.Update.Key["PK"]), it.Put != nil && is(it.Put.Item["PK"]):
				return true
			}
		}
	}
	return false
}

// window is an SDK fault window: open while the schedule says, firing at
// its rate on the calls it aims at.
type window struct {
	f    Fault
	open atomic.Bool
}

// install adds f's rule to the injector. The rule's own rate is 1: the
// window's Match draws the rate (from the run's fault stream) and counts
// what fired.
func (x *run) install(f Fault) *window {
	w := &window{f: f}
	r := faults.Rule{Rate: 1, Delay: f.Delay}
	switch f.Kind {
	case FaultLost:
		r.Kind = faults.KindLostResponse
	case FaultThrottle, FaultThrottleKey:
		r.Kind, r.Service = faults.KindThrottle, "DynamoDB"
	case FaultServerError:
		r.Kind, r.Service = faults.KindServerError, "DynamoDB"
	case FaultHang:
		r.Kind, r.Service = faults.KindDelay, "DynamoDB"
	case FaultSQSLatency:
		r.Kind, r.Service = faults.KindDelay, "SQS"
	case FaultSQSError:
		r.Kind, r.Service = faults.KindSQSError, "SQS"
	default:
		return nil
	}
	label := string(f.Kind)
	if f.Call != "" {
		label += ":" + f.Call
	}
	r.Match = func(input any) bool {
		if !w.open.Load() {
			return false
		}
		switch {
		case f.Kind == FaultThrottleKey:
			if !touches(input, f.HotAgg) {
				return false
			}
		case f.Call != "":
			if classify(input, x.qs.DLQURL) != f.Call {
				return false
			}
		case f.Kind == FaultSQSLatency:
		default:
			if classify(input, x.qs.DLQURL) == CallReceive {
				return false // an empty long poll is no call to fail
			}
		}
		x.fpMu.Lock()
		fire := x.faultRand.Float64() < f.Rate
		x.fpMu.Unlock()
		if fire {
			x.count(label)
		}
		return fire
	}
	x.inj.Add(r)
	return w
}
