package worker_test

import (
	"context"
	"errors"
	"flag"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/faults"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

// MRSCMessages is the size of the global-table proof (issue 24): 10,000
// messages, 30 % of them duplicates. The default run is smaller, for a
// shared 2-core machine; -mrsc-messages=10000 runs the full size:
//
//	bin/ddbworker-dev emulators exec -- go test -race -count=1 ./worker -run TestMRSC -args -mrsc-messages=10000
const MRSCMessages = 10000

var mrscMessages = flag.Int("mrsc-messages", 1500, "messages of TestMRSCSingleWrite (MRSCMessages is the issue's full size)")

// mrscHandlers registers a single-write route with SkipInboxCheck — the
// route an MRSC table serves — whose handler adds 1 to its case's applied
// counter, guarded by the message's version: a double apply shows as 2.
func mrscHandlers(t *testing.T, table string, opts ...ddbworker.RouteOption) *ddbworker.Registry {
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register(caseflow.TypeStageChanged, ddbworker.JSON(func(_ context.Context, m *ddbworker.Message, p caseflow.StageChanged) (ddbworker.Result, error) {
		v, _ := m.AggregateVersion()
		k := caseflow.CaseKey(p.CaseID)
		key := ddbworker.Key{caseflow.AttrPK: k[caseflow.AttrPK].(*ddbtypes.AttributeValueMemberS).Value,
			caseflow.AttrSK: k[caseflow.AttrSK].(*ddbtypes.AttributeValueMemberS).Value}
		return ddbworker.Apply(ddbworker.Update(table, key).Set(caseflow.AttrStage, p.Stage).Add(attrStageChanges, 1).
			Guard(ddbworker.NewerVersion(caseflow.AttrStageVersion, v))), nil
	}), opts...))
	return reg
}

// consistencyOf reads the table's consistency mode as the hosts do: from
// the description DescribeTable returns (and tables.Verify accepts the
// table without TTL, which MRSC does not support).
func consistencyOf(t *testing.T, ddb *dynamodb.Client, table string) ddbtypes.MultiRegionConsistency {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, tables.Verify(ctx, ddb, table, tables.Layout{}), "an MRSC table fits without TTL")
	desc, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	require.NoError(t, err)
	return desc.Table.MultiRegionConsistency
}

// Issue 24, "Global tables": a table that answers as an MRSC global table
// (DescribeTable STRONG, no TTL, transactions refused) with a share of
// its writes refused by ReplicatedWriteConflictException before they reach
// the server and a share of responses lost after the server applied them.
// The single-write route with SkipInboxCheck takes every message, 30 % of
// them producers' duplicates: none is lost, none applied twice, no
// business attempt charged, and not one transaction is tried.
func TestMRSCSingleWrite(t *testing.T) {
	n := *mrscMessages
	unique := n * 7 / 10
	h := newHarness(t, testenv.Options{})
	h.ddb = dynamodb.NewFromConfig(h.env.AWS, h.inj.DynamoDB, faults.MRSC)
	mode := consistencyOf(t, h.ddb, h.env.Table)
	require.Equal(t, ddbtypes.MultiRegionConsistencyStrong, mode)

	conflict := faults.ReplicatedWriteConflict()
	for _, op := range []string{"UpdateItem", "PutItem"} {
		h.inj.Add(faults.Rule{Service: "DynamoDB", Operation: op, Kind: "replicated_write_conflict", Rate: 0.05, Err: conflict})
		h.inj.Add(faults.Rule{Service: "DynamoDB", Operation: op, Kind: faults.KindLostResponse, Rate: 0.03})
	}

	envs := make([]*envelope.Envelope, 0, n)
	for i := range unique {
		envs = append(envs, mustEnv(t)(caseflow.NewStageChange("k-"+strconv.Itoa(i), "c-"+strconv.Itoa(i), "review", 1)))
	}
	rng := rand.New(rand.NewPCG(24, 4))
	for len(envs) < n {
		envs = append(envs, caseflow.Resend(envs[rng.IntN(unique)]))
	}
	rng.Shuffle(len(envs), func(i, j int) { envs[i], envs[j] = envs[j], envs[i] })

	var finals, unexpected atomic.Int64
	var most atomic.Int64 // when 90 % had left the queue: the rest is the retries' backoff
	done := make(chan struct{})
	cfg := singleConfig(h)
	cfg.Concurrency = 32
	cfg.Backoff.Max = 2 * time.Second // a short tail: the retries are infrastructure, none is charged
	cfg.MultiRegionConsistency = mode
	started := time.Now()
	h.start(cfg, worker.Deps{Handlers: mrscHandlers(t, h.env.Table, ddbworker.SingleWrite(), ddbworker.SkipInboxCheck()),
		OnEvent: func(ev worker.Event) {
			if !ev.Final {
				return
			}
			switch ev.Outcome {
			case worker.OutcomeApplied, worker.OutcomeDuplicate:
			default:
				unexpected.Add(1) // terminal (dead-lettered), superseded: not this run's
			}
			switch finals.Add(1) {
			case int64(n) * 9 / 10:
				most.Store(int64(time.Since(started)))
			case int64(n):
				close(done)
			}
		}})
	h.send(envs...)
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		t.Fatalf("%d of %d messages left the queue", finals.Load(), n)
	}
	took := time.Since(started)
	fired := h.inj.Fired()
	t.Logf("%d messages (%d work items, %d duplicates) in %s (90 %% in %s); %d replicated write conflicts, %d lost responses injected; calls %v",
		n, unique, n-unique, took.Round(time.Millisecond), time.Duration(most.Load()).Round(time.Millisecond), fired["replicated_write_conflict"], fired[faults.KindLostResponse], h.inj.Calls())
	require.Positive(t, fired["replicated_write_conflict"])
	require.Positive(t, fired[faults.KindLostResponse])
	require.Zero(t, h.inj.Calls()["DynamoDB.TransactWriteItems"], "an MRSC table refuses transactions: none is tried")
	require.Zero(t, unexpected.Load(), "every message applied or a duplicate: none terminal, none superseded")

	// Read everything back: each case applied exactly once; every inbox
	// record (a redelivery's, through the gate) completed, no attempt
	// charged.
	applied, records := map[string]int64{}, 0
	p := dynamodb.NewScanPaginator(h.env.DynamoDB, &dynamodb.ScanInput{TableName: aws.String(h.env.Table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		require.NoError(t, err)
		for _, it := range page.Items {
			pk := str(it, caseflow.AttrPK)
			switch {
			case strings.HasPrefix(pk, "CASE#"):
				applied[pk] = num(t, it, attrStageChanges)
			case strings.HasPrefix(pk, "IDEMP#"):
				rec, err := (inbox.Store{}).Decode(it)
				require.NoError(t, err)
				records++
				require.Equal(t, inbox.StatusCompleted, rec.Status, "%s", rec.Key)
				require.LessOrEqual(t, rec.Attempts, 1, "%s: no business attempt charged", rec.Key)
			}
		}
	}
	lost, twice := 0, 0
	for i := range unique {
		switch applied[caseflow.CaseKey("c-" + strconv.Itoa(i))[caseflow.AttrPK].(*ddbtypes.AttributeValueMemberS).Value] {
		case 0:
			lost++
		case 1:
		default:
			twice++
		}
	}
	t.Logf("%d cases applied, %d inbox records (redeliveries through the gate)", len(applied), records)
	require.Zero(t, lost, "lost")
	require.Zero(t, twice, "applied twice")
	require.Len(t, applied, unique)
	h.requireQueueEmpty()
}

// On an MRSC table a route whose commit is a transaction cannot be served:
// New refuses it at once, naming the route and the fix.
func TestMRSCRefusesTransactionRoutes(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []ddbworker.RouteOption
		why  string
	}{
		{"gated", nil, "the default gated commit"},
		{"fused", []ddbworker.RouteOption{ddbworker.Fused()}, "Fused"},
		{"single-write with its inbox check", []ddbworker.RouteOption{ddbworker.SingleWrite()}, "SingleWrite without SkipInboxCheck"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := worker.Config{Store: inbox.Store{Table: "orders"}, QueueURL: "https://sqs.eu-west-1.amazonaws.com/1/q", DLQURL: "https://sqs.eu-west-1.amazonaws.com/1/dlq",
				MultiRegionConsistency: ddbtypes.MultiRegionConsistencyStrong}
			deps := worker.Deps{DynamoDB: &dynamodb.Client{}, SQS: &sqs.Client{}, Handlers: mrscHandlers(t, "orders", tc.opts...)}
			start := time.Now()
			w, err := worker.New(deps, cfg)
			took := time.Since(start)
			require.Nil(t, w)
			require.Less(t, took, 100*time.Millisecond)
			var refused *worker.TransactionsRefusedError
			require.ErrorAs(t, err, &refused)
			require.ErrorIs(t, err, worker.ErrTransactionsRefused)
			require.Equal(t, []string{caseflow.TypeStageChanged}, refused.Routes)
			msg := err.Error()
			require.Contains(t, msg, caseflow.TypeStageChanged+" ("+tc.why)
			require.Contains(t, msg, "ddbworker.SingleWrite() and ddbworker.SkipInboxCheck()")
			require.Contains(t, msg, "multi-Region strong consistency")
		})
	}
	t.Run("the single-write route with SkipInboxCheck is served; so is every route on other tables", func(t *testing.T) {
		for _, c := range []struct {
			mode ddbtypes.MultiRegionConsistency
			opts []ddbworker.RouteOption
		}{
			{ddbtypes.MultiRegionConsistencyStrong, []ddbworker.RouteOption{ddbworker.SingleWrite(), ddbworker.SkipInboxCheck()}},
			{ddbtypes.MultiRegionConsistencyEventual, nil},
			{"", []ddbworker.RouteOption{ddbworker.Fused()}},
		} {
			cfg := worker.Config{Store: inbox.Store{Table: "orders"}, QueueURL: "https://sqs.eu-west-1.amazonaws.com/1/q", DLQURL: "https://sqs.eu-west-1.amazonaws.com/1/dlq", MultiRegionConsistency: c.mode}
			_, err := worker.New(worker.Deps{DynamoDB: &dynamodb.Client{}, SQS: &sqs.Client{}, Handlers: mrscHandlers(t, "orders", c.opts...)}, cfg)
			require.NoError(t, err, "%s", c.mode)
		}
	})
	t.Run("a mode DescribeTable never reports is a configuration error", func(t *testing.T) {
		cfg := worker.Config{Store: inbox.Store{Table: "orders"}, QueueURL: "https://sqs.eu-west-1.amazonaws.com/1/q", DLQURL: "https://sqs.eu-west-1.amazonaws.com/1/dlq", MultiRegionConsistency: "STRONGISH"}
		_, err := worker.New(worker.Deps{DynamoDB: &dynamodb.Client{}, SQS: &sqs.Client{}, Handlers: mrscHandlers(t, "orders")}, cfg)
		require.ErrorContains(t, err, "Config.MultiRegionConsistency")
		require.False(t, errors.Is(err, worker.ErrTransactionsRefused))
	})
}
