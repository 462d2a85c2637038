package dlq_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbworker/ddbworker/internal/dlq"
)

// Look first, then redrive a few of one kind as a dry run, then for real.
func Example() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	q, err := dlq.New(sqs.NewFromConfig(cfg), dlq.Config{
		DLQURL:   "https://sqs.eu-west-1.amazonaws.com/123456789012/work-dlq",
		QueueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/work",
	})
	if err != nil {
		log.Fatal(err)
	}
	st, err := q.Stats(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range st.ByCodeType {
		fmt.Printf("%-30s %-40s %d\n", c.Code, c.Type, c.Count)
	}
	opts := dlq.RedriveOptions{Filter: dlq.Filter{Code: "CASE_NOT_FOUND"}, Max: 5, Rate: 2, DryRun: true}
	rep, err := q.Redrive(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("would move %d, skipped %d\n", len(rep.Moved), rep.Skipped)
	opts.DryRun = false
	rep, err = q.Redrive(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range rep.Moved {
		fmt.Printf("moved %s → %s (%s)\n", m.ID, m.NewID, m.Key)
	}
}

// New reports every configuration problem at once.
func ExampleNew() {
	_, err := dlq.New(nil, dlq.Config{MaxScan: -1})
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Println(line)
	}
	// Output:
	// dlq: API is required
	// dlq: Config.DLQURL is required
	// dlq: Config.MaxScan -1 must be at least 1
}
