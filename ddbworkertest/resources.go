package ddbworkertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

// NewTable creates a table with ddbworker's inbox layout — keys, the
// aggregate and attention indexes, TTL — as tables.Ensure does for
// `tables create`, through ddb (an emulator's client, see package
// ddbworkertest/emulators, or any other), and deletes it when t ends. The
// name is cfg.Name, or unique ("t-" and random hex) when empty; it is
// returned. (It lives here, not in package emulators, so that the emulator
// kit's module needs nothing of ddbworker's.)
func NewTable(t testing.TB, ddb *dynamodb.Client, cfg tables.Config) string {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = uniqueName("t")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := tables.Ensure(ctx, ddb, cfg); err != nil {
		t.Fatalf("ddbworkertest: create table %s: %v", cfg.Name, err)
	}
	t.Cleanup(func() {
		_, _ = ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(cfg.Name)})
	})
	return cfg.Name
}

// NewQueues creates a work queue and its DLQ with the redrive policy
// between them, as worker.CreateQueues does for `queues create`, through
// q, and deletes both when t ends. The name is cfg.Name, or unique ("q-"
// and random hex, ".fifo" added for FIFO queues) when empty.
func NewQueues(t testing.TB, q *sqs.Client, cfg worker.QueueConfig) worker.Queues {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = uniqueName("q")
		if cfg.FIFO {
			cfg.Name += ".fifo"
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	qs, err := worker.CreateQueues(ctx, q, cfg)
	if err != nil {
		t.Fatalf("ddbworkertest: create queues %s: %v", cfg.Name, err)
	}
	t.Cleanup(func() {
		for _, u := range []string{qs.URL, qs.DLQURL} {
			_, _ = q.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
	})
	return qs
}

// uniqueName is emulators.UniqueName: prefix, a dash and 12 random hex
// digits.
func uniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}
