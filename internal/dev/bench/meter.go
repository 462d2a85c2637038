package bench

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
)

// meter counts API calls per service and the write capacity DynamoDB
// reports (it asks for ReturnConsumedCapacity=TOTAL on every write).
type meter struct {
	mu           sync.Mutex
	calls        map[string]int
	capacity     float64
	lostReceives int
	readKeys     int // the keys BatchGetItem asked for (each is charged a read)
}

func newMeter() *meter { return &meter{calls: map[string]int{}} }

type reading struct {
	DynamoDB     int
	SQS          int
	Capacity     float64
	Calls        map[string]int
	LostReceives int
	ReadKeys     int
}

func (m *meter) read() reading {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := reading{Capacity: m.capacity, Calls: map[string]int{}, LostReceives: m.lostReceives, ReadKeys: m.readKeys}
	for k, v := range m.calls {
		r.Calls[k] = v
		switch {
		case len(k) > 9 && k[:9] == "DynamoDB.":
			r.DynamoDB += v
		case len(k) > 4 && k[:4] == "SQS.":
			r.SQS += v
		}
	}
	return r
}

func (m *meter) dynamodb(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, m.install) }
func (m *meter) sqs(o *sqs.Options)           { o.APIOptions = append(o.APIOptions, m.install) }

func (m *meter) install(stack *middleware.Stack) error {
	// Inside the retry loop: a receive attempt that failed while the call
	// went on (the SDK retries it) may have taken messages with it, which
	// then stay invisible for a whole visibility timeout.
	lost := middleware.FinalizeMiddlewareFunc("bench.lostReceives", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
		out, md, err := next.HandleFinalize(ctx, in)
		if err != nil && ctx.Err() == nil && awsmiddleware.GetOperationName(ctx) == "ReceiveMessage" {
			m.mu.Lock()
			m.lostReceives++
			m.mu.Unlock()
		}
		return out, md, err
	})
	if err := stack.Finalize.Insert(lost, "Retry", middleware.After); err != nil {
		return err
	}
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("bench.meter", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		keys := 0
		switch p := in.Parameters.(type) {
		case *dynamodb.BatchGetItemInput:
			for _, ka := range p.RequestItems {
				keys += len(ka.Keys)
			}
		case *dynamodb.PutItemInput:
			p.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
		case *dynamodb.UpdateItemInput:
			p.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
		case *dynamodb.TransactWriteItemsInput:
			p.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
		}
		out, md, err := next.HandleInitialize(ctx, in)
		cap := 0.0
		switch r := out.Result.(type) {
		case *dynamodb.PutItemOutput:
			cap = units(r.ConsumedCapacity)
		case *dynamodb.UpdateItemOutput:
			cap = units(r.ConsumedCapacity)
		case *dynamodb.TransactWriteItemsOutput:
			for i := range r.ConsumedCapacity {
				cap += units(&r.ConsumedCapacity[i])
			}
		}
		m.mu.Lock()
		m.calls[awsmiddleware.GetServiceID(ctx)+"."+awsmiddleware.GetOperationName(ctx)]++
		m.capacity += cap
		m.readKeys += keys
		m.mu.Unlock()
		return out, md, err
	}), middleware.Before)
}

func units(c *types.ConsumedCapacity) float64 {
	if c == nil {
		return 0
	}
	return aws.ToFloat64(c.CapacityUnits)
}
