package worker_test

import (
	"context"
	"reflect"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/ddbworker/ddbworker/tables"
)

// Helpers of the regression tests (regress_*_test.go): SDK middleware that
// makes the emulators behave like AWS where they do not.

// withQueueURL returns params with its QueueUrl field replaced by to when
// it is from (a copy: the caller's input is not changed), or params as it
// is.
func withQueueURL(params any, from, to string) any {
	v := reflect.ValueOf(params)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return params
	}
	f := v.Elem().FieldByName("QueueUrl")
	if !f.IsValid() || f.Type() != reflect.TypeFor[*string]() || f.IsNil() || f.Elem().String() != from {
		return params
	}
	cp := reflect.New(v.Elem().Type())
	cp.Elem().Set(v.Elem())
	cp.Elem().FieldByName("QueueUrl").Set(reflect.ValueOf(aws.String(to)))
	return cp.Interface()
}

// fifoEmulation makes a standard queue look like a FIFO queue that returns
// several messages of one group in one receive, as AWS may (fauxqs returns
// at most one message per group per receive, so it cannot show what
// happens to a group's waiting messages). The worker is given Fake, a URL
// ending in ".fifo"; every request for Fake goes to Real, and every
// received message gets the MessageGroupId system attribute Group. It
// records every message the worker received.
type fifoEmulation struct {
	Fake, Real, Group string

	mu       sync.Mutex
	receives [][]types.Message
}

func (f *fifoEmulation) install(o *sqs.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("regress.fifoEmulation", func(ctx context.Context, in middleware.InitializeInput,
			next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			in.Parameters = withQueueURL(in.Parameters, f.Fake, f.Real)
			out, md, err := next.HandleInitialize(ctx, in)
			if r, ok := out.Result.(*sqs.ReceiveMessageOutput); ok && err == nil && len(r.Messages) > 0 {
				for i := range r.Messages {
					if r.Messages[i].Attributes == nil {
						r.Messages[i].Attributes = map[string]string{}
					}
					r.Messages[i].Attributes[string(types.MessageSystemAttributeNameMessageGroupId)] = f.Group
				}
				f.mu.Lock()
				f.receives = append(f.receives, append([]types.Message(nil), r.Messages...))
				f.mu.Unlock()
			}
			return out, md, err
		}), middleware.Before)
	})
}

// Receives returns the non-empty receives so far, each in the order SQS
// returned its messages.
func (f *fifoEmulation) Receives() [][]types.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]types.Message(nil), f.receives...)
}

// receiveRecorder records every message a client received.
type receiveRecorder struct {
	mu   sync.Mutex
	msgs []types.Message
}

func (r *receiveRecorder) install(o *sqs.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("regress.receiveRecorder", func(ctx context.Context, in middleware.InitializeInput,
			next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			if res, ok := out.Result.(*sqs.ReceiveMessageOutput); ok && err == nil {
				r.mu.Lock()
				r.msgs = append(r.msgs, res.Messages...)
				r.mu.Unlock()
			}
			return out, md, err
		}), middleware.Before)
	})
}

func (r *receiveRecorder) Messages() []types.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]types.Message(nil), r.msgs...)
}

// itemKey names a DynamoDB item: table, PK and SK.
func itemKey(table *string, key map[string]ddbtypes.AttributeValue) string {
	s := func(k string) string {
		if v, ok := key[k].(*ddbtypes.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	return aws.ToString(table) + "|" + s(tables.DefaultLayout().PartitionKey) + "|" + s(tables.DefaultLayout().SortKey)
}

// transactItemKeys are the items a transaction writes or checks, in the
// order of its actions.
func transactItemKeys(in *dynamodb.TransactWriteItemsInput) []string {
	keys := make([]string, len(in.TransactItems))
	for i, it := range in.TransactItems {
		switch {
		case it.Put != nil:
			keys[i] = itemKey(it.Put.TableName, it.Put.Item)
		case it.Update != nil:
			keys[i] = itemKey(it.Update.TableName, it.Update.Key)
		case it.Delete != nil:
			keys[i] = itemKey(it.Delete.TableName, it.Delete.Key)
		case it.ConditionCheck != nil:
			keys[i] = itemKey(it.ConditionCheck.TableName, it.ConditionCheck.Key)
		}
	}
	return keys
}
