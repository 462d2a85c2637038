package ddbproxy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/ddbworker/ddbworker/internal/ddbproxy"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/tables"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// fixture is one test's proxy in front of DynamoDB Local and its own table.
type fixture struct {
	proxy  *ddbproxy.Proxy
	aws    aws.Config
	direct *dynamodb.Client // straight to DynamoDB Local, not counted by the proxy
	table  string
}

func newFixture(t *testing.T, cfg ddbproxy.Config) *fixture {
	t.Helper()
	f := &fixture{aws: testenv.AWSConfig(t), table: testenv.Unique("ddbproxy")}
	cfg.Target, _ = testenv.Endpoints(t)
	p, err := ddbproxy.Start(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	f.proxy = p

	f.direct = dynamodb.NewFromConfig(f.aws, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(cfg.Target) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, tables.Ensure(ctx, f.direct, tables.Config{Name: f.table}))
	t.Cleanup(func() {
		_, _ = f.direct.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(f.table)})
	})
	return f
}

// client returns a DynamoDB client that goes through the proxy with the
// SDK's standard retryer, maxAttempts attempts per call and no backoff
// delay (the delay is not what these tests are about).
func (f *fixture) client(maxAttempts int) *dynamodb.Client {
	return dynamodb.NewFromConfig(f.aws, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(f.proxy.URL())
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		})
		o.RetryMaxAttempts = maxAttempts
	})
}

func key(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		tables.DefaultLayout().PartitionKey: &types.AttributeValueMemberS{Value: "item#" + id},
		tables.DefaultLayout().SortKey:      &types.AttributeValueMemberS{Value: "v"},
	}
}

func item(id string, n int) map[string]types.AttributeValue {
	it := key(id)
	it["n"] = &types.AttributeValueMemberN{Value: fmt.Sprint(n)}
	return it
}

func (f *fixture) put(ctx context.Context, c *dynamodb.Client, id string, n int) error {
	_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: item(id, n)})
	return err
}

// stored reads an item straight from DynamoDB Local (nil when absent).
func (f *fixture) stored(t *testing.T, id string) map[string]types.AttributeValue {
	t.Helper()
	out, err := f.direct.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(f.table), Key: key(id), ConsistentRead: aws.Bool(true),
	})
	require.NoError(t, err)
	return out.Item
}

func errorAs[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}

func TestPassRoundTrip(t *testing.T) {
	f := newFixture(t, ddbproxy.Config{})
	c := f.client(1)
	ctx := context.Background()

	require.NoError(t, f.put(ctx, c, "a", 1))
	got, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(f.table), Key: key("a"), ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	require.Equal(t, item("a", 1), got.Item)
	// DynamoDB Local's response headers came through; its x-amz-crc32 did
	// too, and the SDK checked the body against it.
	id, ok := awsmiddleware.GetRequestIDMetadata(got.ResultMetadata)
	require.True(t, ok)
	require.NotEmpty(t, id)

	// A failed condition comes back with the old item intact.
	_, err = c.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(f.table),
		Item:                                item("a", 2),
		ConditionExpression:                 aws.String("attribute_not_exists(PK)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	require.ErrorAs(t, err, &ccf)
	require.Equal(t, item("a", 1), ccf.Item)
	require.Equal(t, item("a", 1), f.stored(t, "a"))

	require.Equal(t, ddbproxy.Stats{
		Total:     3,
		Requests:  map[string]int{"PutItem": 2, "GetItem": 1},
		ByMode:    map[ddbproxy.Mode]int{ddbproxy.Pass: 3},
		Forwarded: 3,
	}, f.proxy.Stats())
}

func TestThrottle(t *testing.T) {
	f := newFixture(t, ddbproxy.Config{})
	c := f.client(3)
	ctx := context.Background()

	tests := []struct {
		name    string
		op      string
		call    func() error
		isType  func(error) bool
		code    string
		message string
	}{
		{
			name: "PutItem", op: "PutItem",
			call:    func() error { return f.put(ctx, c, "put", 1) },
			isType:  errorAs[*types.ProvisionedThroughputExceededException],
			code:    "ProvisionedThroughputExceededException",
			message: "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.",
		},
		{
			name: "GetItem", op: "GetItem",
			call: func() error {
				_, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(f.table), Key: key("put")})
				return err
			},
			isType: errorAs[*types.ProvisionedThroughputExceededException],
			code:   "ProvisionedThroughputExceededException",
		},
		{
			name: "TransactWriteItems", op: "TransactWriteItems",
			call: func() error {
				_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
					{Put: &types.Put{TableName: aws.String(f.table), Item: item("tx", 1)}},
				}})
				return err
			},
			isType: errorAs[*types.ProvisionedThroughputExceededException],
			code:   "ProvisionedThroughputExceededException",
		},
		{
			name: "DescribeTable is control plane", op: "DescribeTable",
			call: func() error {
				_, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(f.table)})
				return err
			},
			isType:  errorAs[*types.ThrottlingException],
			code:    "ThrottlingException",
			message: "Rate of requests exceeds the allowed throughput.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.proxy.Reset()
			f.proxy.SetMode(ddbproxy.Throttle)
			err := tt.call()
			require.Error(t, err)
			require.True(t, tt.isType(err), "%T: %v", errors.Unwrap(err), err)
			var apiErr smithy.APIError
			require.ErrorAs(t, err, &apiErr)
			require.Equal(t, tt.code, apiErr.ErrorCode())
			if tt.message != "" {
				require.Equal(t, tt.message, apiErr.ErrorMessage())
			}
			require.Equal(t, aws.TrueTernary, retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err))
			var respErr *awshttp.ResponseError
			require.ErrorAs(t, err, &respErr)
			require.Equal(t, http.StatusBadRequest, respErr.HTTPStatusCode())
			require.Len(t, respErr.ServiceRequestID(), 52)
			// The standard retryer retried the throttle: 3 attempts, none forwarded.
			require.Equal(t, ddbproxy.Stats{
				Total:    3,
				Requests: map[string]int{tt.op: 3},
				ByMode:   map[ddbproxy.Mode]int{ddbproxy.Throttle: 3},
			}, f.proxy.Stats())
		})
	}

	f.proxy.SetMode(ddbproxy.Pass)
	for _, id := range []string{"put", "tx"} {
		require.Nil(t, f.stored(t, id), "throttled write of %s reached DynamoDB", id)
	}
}

func TestServerError(t *testing.T) {
	f := newFixture(t, ddbproxy.Config{})
	ctx := context.Background()
	f.proxy.SetMode(ddbproxy.ServerError)

	t.Run("500 and 503 alternate", func(t *testing.T) {
		f.proxy.Reset()
		c := f.client(1)
		for i, want := range []int{500, 503, 500, 503} {
			err := f.put(ctx, c, "alt", i)
			var respErr *smithyhttp.ResponseError
			require.ErrorAs(t, err, &respErr, "call %d", i)
			require.Equal(t, want, respErr.HTTPStatusCode(), "call %d", i)
			var apiErr smithy.APIError
			require.ErrorAs(t, err, &apiErr)
			if want == 500 {
				require.True(t, errorAs[*types.InternalServerError](err), "%v", err)
				require.Equal(t, smithy.FaultServer, apiErr.ErrorFault())
			} else {
				// DynamoDB's model has no type for it: a generic API error.
				require.Equal(t, "ServiceUnavailableException", apiErr.ErrorCode())
				require.Equal(t, "Service unavailable", apiErr.ErrorMessage())
			}
			require.False(t, retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err).Bool(), "a server error is no throttle")
		}
	})

	t.Run("retried by the standard retryer", func(t *testing.T) {
		f.proxy.Reset()
		err := f.put(ctx, f.client(3), "retried", 1)
		var maxErr *retry.MaxAttemptsError
		require.ErrorAs(t, err, &maxErr)
		require.Equal(t, 3, maxErr.Attempt)
		var respErr *smithyhttp.ResponseError
		require.ErrorAs(t, err, &respErr)
		require.Equal(t, http.StatusInternalServerError, respErr.HTTPStatusCode()) // attempts 500, 503, 500
		require.Equal(t, ddbproxy.Stats{
			Total:    3,
			Requests: map[string]int{"PutItem": 3},
			ByMode:   map[ddbproxy.Mode]int{ddbproxy.ServerError: 3},
		}, f.proxy.Stats())
	})

	f.proxy.SetMode(ddbproxy.Pass)
	require.Nil(t, f.stored(t, "alt"))
	require.Nil(t, f.stored(t, "retried"))
}

func TestHang(t *testing.T) {
	t.Run("client deadline: dropped, not forwarded", func(t *testing.T) {
		f := newFixture(t, ddbproxy.Config{})
		f.proxy.SetMode(ddbproxy.Hang)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		err := f.put(ctx, f.client(3), "late", 1)
		require.ErrorIs(t, err, context.DeadlineExceeded)

		// Wait until the proxy has seen the client leave, so switching to
		// Pass cannot release the request.
		testenv.Eventually(t, 5*time.Second, func() bool { return f.proxy.Stats().Abandoned == 1 })
		f.proxy.SetMode(ddbproxy.Pass)
		require.Nil(t, f.stored(t, "late"))
		require.Equal(t, ddbproxy.Stats{
			Total:     1,
			Requests:  map[string]int{"PutItem": 1},
			ByMode:    map[ddbproxy.Mode]int{ddbproxy.Hang: 1},
			Abandoned: 1,
		}, f.proxy.Stats())
		require.Zero(t, f.proxy.Holding())
	})

	t.Run("released by SetMode: forwarded", func(t *testing.T) {
		f := newFixture(t, ddbproxy.Config{})
		f.proxy.SetMode(ddbproxy.Hang)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- f.put(ctx, f.client(1), "held", 1) }()

		testenv.Eventually(t, 5*time.Second, func() bool { return f.proxy.Holding() == 1 })
		select {
		case err := <-done:
			t.Fatalf("a held request was answered: %v", err)
		default:
		}
		require.Nil(t, f.stored(t, "held"))

		f.proxy.SetMode(ddbproxy.Pass)
		require.NoError(t, <-done)
		require.Equal(t, item("held", 1), f.stored(t, "held"))
		require.Equal(t, ddbproxy.Stats{
			Total:     1,
			Requests:  map[string]int{"PutItem": 1},
			ByMode:    map[ddbproxy.Mode]int{ddbproxy.Hang: 1},
			Forwarded: 1,
		}, f.proxy.Stats())
	})

	t.Run("released by HangFor: forwarded", func(t *testing.T) {
		const hangFor = 200 * time.Millisecond
		f := newFixture(t, ddbproxy.Config{HangFor: hangFor})
		f.proxy.SetMode(ddbproxy.Hang)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		require.NoError(t, f.put(ctx, f.client(1), "slow", 1))
		require.GreaterOrEqual(t, time.Since(start), hangFor)
		require.Equal(t, item("slow", 1), f.stored(t, "slow"))
		require.Equal(t, ddbproxy.Hang, f.proxy.Mode())
		require.Equal(t, 1, f.proxy.Stats().Forwarded)
	})

	t.Run("reads the whole body before holding", func(t *testing.T) {
		f := newFixture(t, ddbproxy.Config{})
		f.proxy.SetMode(ddbproxy.Hang)
		// Larger than what loopback socket buffers absorb: the client's
		// write only completes if the proxy reads it.
		body := bytes.Repeat([]byte("x"), 32<<20)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		wrote := make(chan struct{})
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { close(wrote) }})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.proxy.URL(), bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810.PutItem")
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		done := make(chan error, 1)
		go func() {
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
				err = fmt.Errorf("answered %s", resp.Status)
			}
			done <- err
		}()

		select {
		case <-wrote:
		case err := <-done:
			t.Fatalf("request ended before it was written: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("the client could not finish writing the request")
		}
		testenv.Eventually(t, 5*time.Second, func() bool { return f.proxy.Holding() == 1 })
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		testenv.Eventually(t, 5*time.Second, func() bool { return f.proxy.Stats().Abandoned == 1 })
		require.Zero(t, f.proxy.Stats().Forwarded)
	})

	t.Run("Close drops held requests", func(t *testing.T) {
		f := newFixture(t, ddbproxy.Config{})
		f.proxy.SetMode(ddbproxy.Hang)
		done := make(chan error, 1)
		go func() { done <- f.put(context.Background(), f.client(1), "closed", 1) }()
		testenv.Eventually(t, 5*time.Second, func() bool { return f.proxy.Holding() == 1 })
		require.NoError(t, f.proxy.Close())
		// The connection closed without an answer: the SDK failed to send.
		err := <-done
		require.True(t, errorAs[*smithyhttp.RequestSendError](err), "%v", err)
		var respErr *smithyhttp.ResponseError
		require.ErrorAs(t, err, &respErr)
		require.Zero(t, respErr.HTTPStatusCode(), "Close answered the request: %v", err)
		require.Nil(t, f.stored(t, "closed"))
		require.Equal(t, 1, f.proxy.Stats().Abandoned)
	})
}

func TestStartConfig(t *testing.T) {
	const target = "http://127.0.0.1:1" // never dialled
	tests := []struct {
		name        string
		cfg         ddbproxy.Config
		notLoopback bool // the error is ErrNotLoopback
		wantErr     bool
	}{
		{name: "default addr", cfg: ddbproxy.Config{Target: target}},
		{name: "127.0.0.1", cfg: ddbproxy.Config{Target: target, Addr: "127.0.0.1:0"}},
		{name: "other loopback", cfg: ddbproxy.Config{Target: target, Addr: "127.0.0.2:0"}},
		{name: "localhost", cfg: ddbproxy.Config{Target: target, Addr: "localhost:0"}},
		{name: "every interface", cfg: ddbproxy.Config{Target: target, Addr: ":0"}, notLoopback: true},
		{name: "0.0.0.0", cfg: ddbproxy.Config{Target: target, Addr: "0.0.0.0:0"}, notLoopback: true},
		{name: "::", cfg: ddbproxy.Config{Target: target, Addr: "[::]:0"}, notLoopback: true},
		{name: "public IP", cfg: ddbproxy.Config{Target: target, Addr: "192.0.2.1:0"}, notLoopback: true},
		{name: "host name", cfg: ddbproxy.Config{Target: target, Addr: "example.com:0"}, notLoopback: true},
		{name: "no port", cfg: ddbproxy.Config{Target: target, Addr: "127.0.0.1"}, notLoopback: true},
		{name: "no target", cfg: ddbproxy.Config{}, wantErr: true},
		{name: "target without scheme", cfg: ddbproxy.Config{Target: "127.0.0.1:8000"}, wantErr: true},
		{name: "negative HangFor", cfg: ddbproxy.Config{Target: target, HangFor: -time.Second}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ddbproxy.Start(tt.cfg)
			switch {
			case tt.notLoopback:
				require.ErrorIs(t, err, ddbproxy.ErrNotLoopback)
			case tt.wantErr:
				require.Error(t, err)
				require.NotErrorIs(t, err, ddbproxy.ErrNotLoopback)
			default:
				require.NoError(t, err)
				require.Regexp(t, `^http://(127\.0\.0\.\d+|\[::1\]):\d+$`, p.URL())
				require.Equal(t, ddbproxy.Pass, p.Mode())
				require.NoError(t, p.Close())
				require.NoError(t, p.Close())
			}
		})
	}
}

func TestConcurrent(t *testing.T) {
	const workers = 20

	t.Run("pass", func(t *testing.T) {
		f := newFixture(t, ddbproxy.Config{})
		c := f.client(1)
		var done atomic.Bool
		g, ctx := errgroup.WithContext(context.Background())
		for i := range workers {
			g.Go(func() error {
				id := fmt.Sprint("w", i)
				if err := f.put(ctx, c, id, i); err != nil {
					return err
				}
				out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(f.table), Key: key(id), ConsistentRead: aws.Bool(true)})
				if err != nil {
					return err
				}
				if want := item(id, i); !reflect.DeepEqual(want, out.Item) {
					return fmt.Errorf("%s: got %v, want %v", id, out.Item, want)
				}
				return nil
			})
		}
		reads := make(chan struct{})
		go func() { // readers race the handlers
			defer close(reads)
			for !done.Load() {
				_ = f.proxy.Stats()
				_ = f.proxy.Mode()
			}
		}()
		err := g.Wait()
		done.Store(true)
		<-reads
		require.NoError(t, err)
		require.Equal(t, ddbproxy.Stats{
			Total:     2 * workers,
			Requests:  map[string]int{"PutItem": workers, "GetItem": workers},
			ByMode:    map[ddbproxy.Mode]int{ddbproxy.Pass: 2 * workers},
			Forwarded: 2 * workers,
		}, f.proxy.Stats())
	})

	t.Run("mode changes under load", func(t *testing.T) {
		f := newFixture(t, ddbproxy.Config{})
		c := f.client(1)
		stop := make(chan struct{})
		flipped := make(chan struct{})
		go func() {
			defer close(flipped)
			modes := []ddbproxy.Mode{ddbproxy.Throttle, ddbproxy.ServerError, ddbproxy.Pass}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
					f.proxy.SetMode(modes[i%len(modes)])
				}
			}
		}()
		var g errgroup.Group
		for i := range workers {
			g.Go(func() error {
				for j := range 5 {
					err := f.put(context.Background(), c, fmt.Sprint("m", i, "-", j), j)
					var apiErr smithy.APIError
					if err != nil && !(errors.As(err, &apiErr) && faultCodes[apiErr.ErrorCode()]) {
						return err
					}
				}
				return nil
			})
		}
		err := g.Wait()
		close(stop)
		<-flipped
		require.NoError(t, err)

		s := f.proxy.Stats()
		require.Equal(t, workers*5, s.Total)
		require.Equal(t, map[string]int{"PutItem": workers * 5}, s.Requests)
		require.Equal(t, s.Total, s.ByMode[ddbproxy.Pass]+s.ByMode[ddbproxy.Throttle]+s.ByMode[ddbproxy.ServerError])
		require.Equal(t, s.ByMode[ddbproxy.Pass], s.Forwarded)
	})
}

// faultCodes are the error codes of Throttle's and ServerError's answers to PutItem.
var faultCodes = map[string]bool{
	"ProvisionedThroughputExceededException": true,
	"InternalServerError":                    true,
	"ServiceUnavailableException":            true,
}
