package testenv

import (
	"context"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"
)

// SentMessage is one message an SQS client sent (SendMessage, or an entry
// of SendMessageBatch that SQS accepted), as the client asked.
type SentMessage struct {
	QueueURL  string
	MessageID string // SQS's
	Body      string
	// GroupID is the MessageGroupId the client sent: nil when none.
	GroupID    *string
	Attributes map[string]types.MessageAttributeValue
}

// MessageGroups is SDK middleware for SQS clients (install it with
// Options on every client of a test: the sender's and the receiver's) that
// records every message the clients send with its MessageGroupId — what
// a test asserts, since the emulator does not show it — and serves the
// recorded MessageGroupId back on receive.
//
// The serving stands in for the emulator's gap: fauxqs 2.4.1 drops the
// MessageGroupId of a message sent to a standard queue (its receive
// returns no MessageGroupId system attribute), where AWS keeps it — the
// tenant of an SQS fair queue — and returns it to a receive that asks for
// it (MessageSystemAttributeNames All or MessageGroupId). So a received
// message whose id a client of this MessageGroups sent with a group, and
// that came back without one, gets it, only when the receive asked for
// system attributes as AWS would require. A message keeps its id when
// SQS's redrive policy moves it to the DLQ, so it keeps its group there
// too, as on AWS.
type MessageGroups struct {
	mu     sync.Mutex
	sent   []SentMessage
	byID   map[string]string // message id → MessageGroupId
	served int
}

// Options installs the middleware: pass it to sqs.NewFromConfig.
func (g *MessageGroups) Options(o *sqs.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("testenv.MessageGroups", g.handle), middleware.After)
	})
}

func (g *MessageGroups) handle(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	out, md, err := next.HandleInitialize(ctx, in)
	if err != nil {
		return out, md, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byID == nil {
		g.byID = map[string]string{}
	}
	switch p := in.Parameters.(type) {
	case *sqs.SendMessageInput:
		if r, ok := out.Result.(*sqs.SendMessageOutput); ok {
			g.record(SentMessage{QueueURL: aws.ToString(p.QueueUrl), MessageID: aws.ToString(r.MessageId), Body: aws.ToString(p.MessageBody),
				GroupID: p.MessageGroupId, Attributes: p.MessageAttributes})
		}
	case *sqs.SendMessageBatchInput:
		if r, ok := out.Result.(*sqs.SendMessageBatchOutput); ok {
			ids := map[string]string{}
			for _, s := range r.Successful {
				ids[aws.ToString(s.Id)] = aws.ToString(s.MessageId)
			}
			for _, e := range p.Entries {
				if id, ok := ids[aws.ToString(e.Id)]; ok {
					g.record(SentMessage{QueueURL: aws.ToString(p.QueueUrl), MessageID: id, Body: aws.ToString(e.MessageBody),
						GroupID: e.MessageGroupId, Attributes: e.MessageAttributes})
				}
			}
		}
	case *sqs.ReceiveMessageInput:
		r, ok := out.Result.(*sqs.ReceiveMessageOutput)
		if !ok || !asksGroupID(p) {
			return out, md, err
		}
		for i := range r.Messages {
			m := &r.Messages[i]
			group, known := g.byID[aws.ToString(m.MessageId)]
			if !known || m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)] != "" {
				continue
			}
			if m.Attributes == nil {
				m.Attributes = map[string]string{}
			}
			m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)] = group
			g.served++
		}
	}
	return out, md, err
}

func (g *MessageGroups) record(s SentMessage) {
	g.sent = append(g.sent, s)
	if s.GroupID != nil {
		g.byID[s.MessageID] = *s.GroupID
	}
}

// asksGroupID reports whether a receive asks for the MessageGroupId system
// attribute, directly or as All (MessageSystemAttributeNames; the
// deprecated AttributeNames, which nothing here uses, is not read).
func asksGroupID(in *sqs.ReceiveMessageInput) bool {
	for _, n := range in.MessageSystemAttributeNames {
		if n == types.MessageSystemAttributeNameAll || n == types.MessageSystemAttributeNameMessageGroupId {
			return true
		}
	}
	return false
}

// Sent returns the messages sent so far, in order; to the queue at
// queueURL only, unless queueURL is "".
func (g *MessageGroups) Sent(queueURL string) []SentMessage {
	g.mu.Lock()
	defer g.mu.Unlock()
	if queueURL == "" {
		return slices.Clone(g.sent)
	}
	var out []SentMessage
	for _, s := range g.sent {
		if s.QueueURL == queueURL {
			out = append(out, s)
		}
	}
	return out
}

// Served is how many received messages got their MessageGroupId from the
// record (the emulator's gap filled).
func (g *MessageGroups) Served() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.served
}
