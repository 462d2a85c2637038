package stale_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/stale"
)

// A sweeper over the attention index (the workers run with
// IndexProcessing): report expired leases, mark those expired for more than
// an hour LEASE_ABANDONED, at most 100 per sweep.
func ExampleSweeper() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return
	}
	sw, err := stale.NewSweeper(dynamodb.NewFromConfig(cfg), stale.SweepConfig{
		Store: inbox.Store{Table: "ddbworker", IndexProcessing: true}, Policy: stale.Policy{Lease: 30 * time.Second}, Grace: time.Hour, UseIndex: true,
	})
	if err != nil {
		return
	}
	rep, err := sw.Sweep(ctx, stale.SweepOptions{MaxMarks: 100})
	if err != nil {
		return
	}
	for _, s := range rep.Stuck {
		fmt.Println(s.Record.Key, s.ExpiredFor.Round(time.Second), s.Abandoned, s.Marked, s.Note)
	}
}

// NewSweeper reports every configuration problem at once.
func ExampleNewSweeper() {
	_, err := stale.NewSweeper(nil, stale.SweepConfig{Grace: -time.Minute, PageSize: 5000})
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Println(line)
	}
	// Output:
	// stale: SweepAPI is required
	// stale: SweepConfig: inbox: Store.Table is required
	// stale: SweepConfig.Grace -1m0s must not be negative
	// stale: SweepConfig.PageSize 5000 must be within 1..1000
}
