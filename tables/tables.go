package tables

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Key and index attribute names.
const (
	AttrPK     = "PK"
	AttrSK     = "SK"
	AttrGSI1PK = "GSI1PK"
	AttrGSI1SK = "GSI1SK"
	AttrGSI2PK = "GSI2PK"
	AttrGSI2SK = "GSI2SK"
)

// Inbox record attribute names (DESIGN §2). `status` and `ttl` are reserved
// words in DynamoDB expressions: build expressions with
// feature/dynamodb/expression, which escapes every name.
const (
	AttrStatus         = "status"
	AttrRequestHash    = "requestHash"
	AttrMessageType    = "messageType"
	AttrSchemaVersion  = "schemaVersion"
	AttrAggregateType  = "aggregateType"
	AttrAggregateID    = "aggregateId"
	AttrCorrelationID  = "correlationId"
	AttrCausationID    = "causationId"
	AttrProducer       = "producer"
	AttrIdempotencyKey = "idempotencyKey"
	AttrFirstSeenAt    = "firstSeenAt"
	AttrLastSeenAt     = "lastSeenAt"
	AttrStartedAt      = "startedAt"
	AttrCompletedAt    = "completedAt"
	AttrFailedAt       = "failedAt"
	AttrAttempts       = "attempts"
	AttrDeliveries     = "deliveries"
	AttrLeaseOwner     = "leaseOwner"
	AttrLeaseToken     = "leaseToken"
	AttrLeaseExpiresAt = "leaseExpiresAt"
	AttrFailureCode    = "failureCode"
	AttrFailureMessage = "failureMessage"
	AttrOutcome        = "outcome"
	AttrResultRef      = "resultRef"
	AttrSQSMessageID   = "sqsMessageId"
	AttrTTL            = "ttl"
)

// Index names.
const (
	// IndexAggregate (GSI1, KEYS_ONLY) lists what happened to one aggregate,
	// in order. Its keys are written once, at the gate.
	IndexAggregate = "GSI1"
	// IndexAttention (GSI2, KEYS_ONLY, sparse) holds failed records (and,
	// when enabled, PROCESSING records sorted by lease expiry).
	IndexAttention = "GSI2"
)

// Sentinel errors.
var (
	// ErrIncompatible reports an existing table whose keys, indexes or TTL
	// attribute differ from ddbworker's layout.
	ErrIncompatible = errors.New("tables: incompatible table")
	// ErrNotActive reports a table that did not become ACTIVE in time.
	ErrNotActive = errors.New("tables: table not active")
)

// IncompatibleError says what differs.
type IncompatibleError struct {
	Table   string
	Problem string
}

func (e *IncompatibleError) Error() string {
	return fmt.Sprintf("tables: table %s is not a ddbworker table: %s", e.Table, e.Problem)
}

// Unwrap returns ErrIncompatible.
func (e *IncompatibleError) Unwrap() error { return ErrIncompatible }

// API is what Ensure needs of DynamoDB.
type API interface {
	CreateTable(ctx context.Context, params *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, params *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(ctx context.Context, params *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	DescribeTimeToLive(ctx context.Context, params *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
}

// Config configures Ensure.
type Config struct {
	// Name is the table name. Required.
	Name string
	// WaitTimeout bounds the wait for ACTIVE. Default: 5 minutes.
	WaitTimeout time.Duration
	// Tags are added when the table is created. Default: none.
	Tags map[string]string
}

func (c *Config) validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("tables: Config.Name is required"))
	} else if len(c.Name) < 3 || len(c.Name) > 255 {
		errs = append(errs, fmt.Errorf("tables: Config.Name %q must be 3..255 characters", c.Name))
	}
	if c.WaitTimeout < 0 {
		errs = append(errs, errors.New("tables: Config.WaitTimeout must not be negative"))
	}
	if c.WaitTimeout == 0 {
		c.WaitTimeout = 5 * time.Minute
	}
	return errors.Join(errs...)
}

// Definition returns the CreateTable input of a ddbworker table named name.
func Definition(name string) *dynamodb.CreateTableInput {
	str := func(n string) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(n), AttributeType: types.ScalarAttributeTypeS}
	}
	keys := func(pk, sk string) []types.KeySchemaElement {
		return []types.KeySchemaElement{
			{AttributeName: aws.String(pk), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(sk), KeyType: types.KeyTypeRange},
		}
	}
	keysOnly := &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}
	return &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{str(AttrPK), str(AttrSK), str(AttrGSI1PK), str(AttrGSI1SK), str(AttrGSI2PK), str(AttrGSI2SK)},
		KeySchema:            keys(AttrPK, AttrSK),
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			{IndexName: aws.String(IndexAggregate), KeySchema: keys(AttrGSI1PK, AttrGSI1SK), Projection: keysOnly},
			{IndexName: aws.String(IndexAttention), KeySchema: keys(AttrGSI2PK, AttrGSI2SK), Projection: keysOnly},
		},
	}
}

// Ensure makes the table exist with ddbworker's layout and TTL on `ttl`.
// It creates the table when missing, waits until it is ACTIVE, checks an
// existing table's keys and indexes, and enables TTL unless it already is.
// Calling it again is a no-op; two concurrent callers both succeed.
func Ensure(ctx context.Context, api API, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	desc, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(cfg.Name)})
	var notFound *types.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
		in := Definition(cfg.Name)
		for k, v := range cfg.Tags {
			in.Tags = append(in.Tags, types.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		_, err = api.CreateTable(ctx, in)
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("tables: create %s: %w", cfg.Name, err)
		}
	case err != nil:
		return fmt.Errorf("tables: describe %s: %w", cfg.Name, err)
	default:
		if err := checkLayout(cfg.Name, desc.Table); err != nil {
			return err
		}
	}
	waiter := dynamodb.NewTableExistsWaiter(api, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 200 * time.Millisecond
		o.MaxDelay = 5 * time.Second
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(cfg.Name)}, cfg.WaitTimeout); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotActive, cfg.Name, err)
	}
	return ensureTTL(ctx, api, cfg.Name)
}

func ensureTTL(ctx context.Context, api API, name string) error {
	ttl, err := api.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	if err != nil {
		return fmt.Errorf("tables: describe TTL of %s: %w", name, err)
	}
	if d := ttl.TimeToLiveDescription; d != nil {
		switch d.TimeToLiveStatus {
		case types.TimeToLiveStatusEnabled, types.TimeToLiveStatusEnabling:
			if got := aws.ToString(d.AttributeName); got != AttrTTL {
				return &IncompatibleError{Table: name, Problem: fmt.Sprintf("TTL is on attribute %q, want %q", got, AttrTTL)}
			}
			return nil
		}
	}
	_, err = api.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(AttrTTL), Enabled: aws.Bool(true)},
	})
	// A concurrent Ensure may have enabled it between our describe and update.
	if err != nil && !strings.Contains(err.Error(), "already enabled") {
		return fmt.Errorf("tables: enable TTL on %s: %w", name, err)
	}
	return nil
}

func checkLayout(name string, t *types.TableDescription) error {
	if t == nil {
		return &IncompatibleError{Table: name, Problem: "no description"}
	}
	want := Definition(name)
	if !sameKeys(t.KeySchema, want.KeySchema) {
		return &IncompatibleError{Table: name, Problem: "primary key is not (PK string, SK string)"}
	}
	have := map[string][]types.KeySchemaElement{}
	for _, g := range t.GlobalSecondaryIndexes {
		have[aws.ToString(g.IndexName)] = g.KeySchema
	}
	for _, g := range want.GlobalSecondaryIndexes {
		ks, ok := have[aws.ToString(g.IndexName)]
		if !ok {
			return &IncompatibleError{Table: name, Problem: "missing index " + aws.ToString(g.IndexName)}
		}
		if !sameKeys(ks, g.KeySchema) {
			return &IncompatibleError{Table: name, Problem: "index " + aws.ToString(g.IndexName) + " has other keys"}
		}
	}
	return nil
}

func sameKeys(a, b []types.KeySchemaElement) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if aws.ToString(a[i].AttributeName) != aws.ToString(b[i].AttributeName) || a[i].KeyType != b[i].KeyType {
			return false
		}
	}
	return true
}
