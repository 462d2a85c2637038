package dlq

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
)

// The pacer lets the first batch go at once and spaces the next ones by
// n/rate, without sleeping in the test.
func TestRedrivePacer(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var slept []time.Duration
	p := &pacer{per: 100 * time.Millisecond, now: func() time.Time { return now },
		sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d); now = now.Add(d); return nil }}
	ctx := context.Background()
	require.NoError(t, p.wait(ctx, 10))
	require.Empty(t, slept, "the first batch goes at once")
	require.NoError(t, p.wait(ctx, 10))
	require.Equal(t, []time.Duration{time.Second}, slept, "10 messages at 10/s take a second")
	now = now.Add(3 * time.Second) // idle: no credit builds up beyond one batch
	require.NoError(t, p.wait(ctx, 5))
	require.NoError(t, p.wait(ctx, 1))
	require.Equal(t, []time.Duration{time.Second, 500 * time.Millisecond}, slept)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, p.wait(cancelled, 1), context.Canceled)
}

func TestDLQParse(t *testing.T) {
	str := func(s string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
	}
	for _, tc := range []struct {
		name string
		in   types.Message
		want Message
	}{
		{"from the worker", types.Message{MessageId: aws.String("d1"), Body: aws.String(`{"messageType":"Body","idempotencyKey":"kb"}`),
			MessageAttributes: map[string]types.MessageAttributeValue{AttrFailureCode: str("CASE_NOT_FOUND"), AttrFailureMessage: str("gone"),
				AttrFailedAt: str("2026-01-02T03:04:05.678Z"), AttrSourceMessageID: str("s1"), AttrMessageType: str("T"), AttrIdempotencyKey: str("k")},
			Attributes: map[string]string{"SentTimestamp": "1767323045678", "ApproximateReceiveCount": "3", "MessageGroupId": "g"}},
			Message{ID: "d1", FailureCode: "CASE_NOT_FOUND", FailureMessage: "gone", FailedAt: time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC),
				SourceMessageID: "s1", MessageType: "T", IdempotencyKey: "k", GroupID: "g", SentAt: time.UnixMilli(1767323045678).UTC(),
				FirstSentAt: time.UnixMilli(1767323045678).UTC(), ReceiveCount: 3}},
		{"an earlier first send", types.Message{MessageId: aws.String("d6"), Body: aws.String(`{"messageType":"T6","idempotencyKey":"k6"}`),
			MessageAttributes: map[string]types.MessageAttributeValue{AttrFirstSentAt: str("1767000000000")},
			Attributes:        map[string]string{"SentTimestamp": "1767323045678"}},
			Message{ID: "d6", FailureCode: CodeNone, MessageType: "T6", IdempotencyKey: "k6", SentAt: time.UnixMilli(1767323045678).UTC(),
				FirstSentAt: time.UnixMilli(1767000000000).UTC()}},
		{"invalid envelope from the worker: type from the body", types.Message{MessageId: aws.String("d2"), Body: aws.String(`{"messageType":"T2"}`),
			MessageAttributes: map[string]types.MessageAttributeValue{AttrFailureCode: str("MISSING_FIELD")}},
			Message{ID: "d2", FailureCode: "MISSING_FIELD", MessageType: "T2"}},
		{"redrive policy", types.Message{MessageId: aws.String("d3"), Body: aws.String(`{"messageType":"T3","idempotencyKey":"k3","payload":{}}`)},
			Message{ID: "d3", FailureCode: CodeNone, MessageType: "T3", IdempotencyKey: "k3"}},
		{"unreadable", types.Message{MessageId: aws.String("d4"), Body: aws.String(`not json`)},
			Message{ID: "d4", FailureCode: CodeNone, MessageType: TypeUnreadable}},
		{"JSON but not an envelope", types.Message{MessageId: aws.String("d5"), Body: aws.String(`[1,2]`)},
			Message{ID: "d5", FailureCode: CodeNone, MessageType: TypeUnreadable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parse(tc.in)
			got.Body, got.Attributes, got.receipt = "", nil, ""
			require.Equal(t, tc.want, got)
		})
	}
}

func TestRedriveOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    RedriveOptions
		dryRun  bool
		url     string
		wantErr []string
		wantMax int
	}{
		{"defaults", RedriveOptions{}, false, "q", nil, 10},
		{"all", RedriveOptions{All: true}, false, "q", nil, 0},
		{"dry run needs no queue", RedriveOptions{DryRun: true}, true, "", nil, 10},
		{"no queue", RedriveOptions{}, false, "", []string{"QueueURL"}, 10},
		{"max and all", RedriveOptions{All: true, Max: 5}, false, "q", []string{"exclude each other"}, 5},
		{"negative", RedriveOptions{Max: -1, Rate: -2}, false, "q", []string{"Max -1", "Rate -2"}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.validate(tc.dryRun, tc.url)
			if tc.wantErr == nil {
				require.NoError(t, err)
			}
			for _, w := range tc.wantErr {
				require.ErrorContains(t, err, w)
			}
			require.Equal(t, tc.wantMax, tc.opts.Max)
		})
	}
}
