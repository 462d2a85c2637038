package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/s3payload"
)

// The daemon reads payloads by S3 reference as deployed: an S3 client from
// the AWS configuration (AWS_ENDPOINT_URL_S3 naming the emulator),
// path-style by DDBWORKER_S3_PATH_STYLE; a payloadRef and an SQS Extended
// Client message are each applied once and counted in
// ddbworker_payload_fetches_total.
func TestDaemonPayloadsByReference(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	c := testenv.S3(t)
	bucket := testenv.NewBucket(t, c)
	ctx := context.Background()
	require.NoError(t, caseflow.SeedCases(ctx, env.DynamoDB, env.Table, []string{"c1", "c2"}))

	off, err := s3payload.NewOffloader(s3payload.OffloaderDeps{S3: c}, s3payload.OffloaderConfig{Bucket: bucket})
	require.NoError(t, err)
	byRef, err := caseflow.NewDeadlineRequest("k-daemon-ref", "c1", "review", time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	ref, err := off.Offload(ctx, byRef.MessageType, byRef.Payload)
	require.NoError(t, err)
	byRef.Payload, byRef.PayloadRef = nil, &ref
	body, err := envelope.Encode(byRef)
	require.NoError(t, err)
	_, err = env.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(env.Queues.URL), MessageBody: aws.String(string(body))})
	require.NoError(t, err)

	ext, err := caseflow.NewDeadlineRequest("k-daemon-ext", "c2", "review", time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	body, err = envelope.Encode(ext)
	require.NoError(t, err)
	_, err = c.PutObject(ctx, testenv.S3ObjectInput(bucket, "ext/k-daemon-ext", body))
	require.NoError(t, err)
	ptr := s3payload.Pointer{Bucket: bucket, Key: "ext/k-daemon-ext", Size: int64(len(body))}
	_, err = env.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(env.Queues.URL),
		MessageBody: aws.String(ptr.Body()), MessageAttributes: ptr.Attributes()})
	require.NoError(t, err)

	bin := buildBinary(t)
	addr := freeAddr(t)
	cmd := exec.Command(bin, "run")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	cmd.Env = append(os.Environ(), "DDBWORKER_TABLE="+env.Table, "DDBWORKER_QUEUE_URL="+env.Queues.URL, "DDBWORKER_DLQ_URL="+env.Queues.DLQURL,
		"DDBWORKER_METRICS_ADDR="+addr, "DDBWORKER_VISIBILITY_TIMEOUT=3s", "DDBWORKER_WAIT_TIME=1s",
		"AWS_ENDPOINT_URL_S3="+testenv.S3Endpoint(t), "DDBWORKER_S3_PATH_STYLE=true")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	testenv.Eventually(t, 60*time.Second, func() bool { return metricSum(t, addr, "ddbworker_payload_fetches_total") == 2 },
		"two payloads fetched")
	testenv.Eventually(t, 30*time.Second, func() bool { return testenv.InspectQueue(t, env.Queues.URL).Total() == 0 }, "queue drained")
	for _, key := range []string{"k-daemon-ref", "k-daemon-ext"} {
		out, err := env.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(env.Table),
			Key: (inbox.Store{}).Key(key, caseflow.TypeDeadline), ConsistentRead: aws.Bool(true)})
		require.NoError(t, err)
		rec, err := (inbox.Store{}).Decode(out.Item)
		require.NoError(t, err)
		require.Equal(t, inbox.StatusCompleted, rec.Status, key)
	}
	require.Equal(t, 0.0, metricSum(t, addr, "ddbworker_payload_access_denied_total"))
	require.Equal(t, 0.0, metricSum(t, addr, "ddbworker_dlq_sent_total"))
	resp, err := http.Get("http://" + addr + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}
