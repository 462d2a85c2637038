package producer_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/producer"
	"github.com/ddbworker/ddbworker/worker"
)

// tenantFixture is a queue and a producer whose SQS client records every
// message it sends with its MessageGroupId (the emulator keeps none on a
// standard queue: what the producer sends is what a test can see).
type tenantFixture struct {
	env    *testenv.Env
	groups *testenv.MessageGroups
	client *sqs.Client
	dec    *envelope.Decoder
}

func newTenantFixture(t *testing.T, fifo bool) *tenantFixture {
	env := testenv.New(t, testenv.Options{Queue: worker.QueueConfig{FIFO: fifo, VisibilityTimeout: 30 * time.Second}})
	dec, err := envelope.NewDecoder(envelope.Config{})
	require.NoError(t, err)
	g := &testenv.MessageGroups{}
	return &tenantFixture{env: env, groups: g, client: sqs.NewFromConfig(env.AWS, g.Options), dec: dec}
}

func (f *tenantFixture) producer(t *testing.T, cfg producer.Config) *producer.Producer {
	cfg.QueueURL, cfg.Producer = f.env.Queues.URL, "orders-service"
	p, err := producer.New(f.client, cfg)
	require.NoError(t, err)
	return p
}

// sentGroups maps the idempotency key of every message sent to the
// MessageGroupId it was sent with ("-": none).
func (f *tenantFixture) sentGroups(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, s := range f.groups.Sent(f.env.Queues.URL) {
		e, err := f.dec.Decode([]byte(s.Body))
		require.NoError(t, err)
		out[e.IdempotencyKey] = aws.ToString(s.GroupID)
		if s.GroupID == nil {
			out[e.IdempotencyKey] = "-"
		}
	}
	return out
}

// Regression (issue 24, tenants kept): the producer sent no MessageGroupId
// to a standard queue, so a fair queue saw every message as a tenant of
// its own. A message's tenant (Message.Tenant, else Config.Tenant) is its
// MessageGroupId on a standard queue; a message without one is sent
// without one.
func TestSendTenantStandardQueue(t *testing.T) {
	f := newTenantFixture(t, false)
	p := f.producer(t, producer.Config{Tenant: func(e *envelope.Envelope) string {
		if e.AggregateID == "untenanted" {
			return ""
		}
		return "acct-" + e.AggregateID
	}})
	msgs := []producer.Message{order("1", 0), order("2", 0), order("untenanted", 0), order("3", 0), order("untenanted", 1)}
	msgs[1].Tenant = "org/acme:eu-1" // its own, over Config.Tenant's; punctuation is fine
	msgs[4].Tenant = strings.Repeat("t", 128)
	msgs[3].Delay = 2 * time.Second // a tenant and a delay together
	results, err := p.Send(context.Background(), msgs...)
	require.NoError(t, err)
	for i, r := range results {
		require.NoError(t, r.Err, "message %d", i)
	}
	require.Equal(t, map[string]string{
		msgs[0].IdempotencyKey: "acct-1",
		msgs[1].IdempotencyKey: "org/acme:eu-1",
		msgs[2].IdempotencyKey: "-",
		msgs[3].IdempotencyKey: "acct-3",
		msgs[4].IdempotencyKey: strings.Repeat("t", 128),
	}, f.sentGroups(t))

	// SendEnvelopes: Config.Tenant's.
	e, err := p.Envelope(order("9", 0))
	require.NoError(t, err)
	_, err = p.SendEnvelopes(context.Background(), e)
	require.NoError(t, err)
	require.Equal(t, "acct-9", f.sentGroups(t)[e.IdempotencyKey])
}

// Config.Tenant sees the payload inline, even when an Offloader takes it.
func TestSendTenantFromPayloadBeforeOffload(t *testing.T) {
	f := newTenantFixture(t, false)
	p := f.producer(t, producer.Config{Offloader: &memOffloader{objects: map[string][]byte{}}, OffloadAbove: 64,
		Tenant: func(e *envelope.Envelope) string {
			var pl struct {
				Account string `json:"account"`
			}
			if json.Unmarshal(e.Payload, &pl) != nil {
				return ""
			}
			return pl.Account
		}})
	m := order("5", 0)
	m.Payload = map[string]any{"account": "acct-77", "notes": strings.Repeat("n", 200)}
	results, err := p.Send(context.Background(), m)
	require.NoError(t, err)
	require.True(t, results[0].Offloaded)
	require.Equal(t, "acct-77", f.sentGroups(t)[m.IdempotencyKey])
}

// A tenant SQS would refuse as a MessageGroupId fails its message with a
// typed error, naming the value, and the message is not sent — never sent
// without its tenant; the other messages of the call go.
func TestSendTenantRefused(t *testing.T) {
	for _, tc := range []struct {
		name, tenant string
		viaConfig    bool
	}{
		{"a space", "acme corp", false},
		{"over 128 characters", strings.Repeat("x", 129), false},
		{"not ASCII", "müller-gmbh", false},
		{"a control character", "acme\n", false},
		{"from Config.Tenant", "acme corp", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTenantFixture(t, false)
			cfg := producer.Config{}
			bad := order("bad", 0)
			if tc.viaConfig {
				cfg.Tenant = func(e *envelope.Envelope) string {
					if e.AggregateID == "bad" {
						return tc.tenant
					}
					return ""
				}
			} else {
				bad.Tenant = tc.tenant
			}
			p := f.producer(t, cfg)
			good := order("good", 0)
			good.Tenant = "acme"
			results, err := p.Send(context.Background(), bad, good)
			require.Error(t, err)
			require.ErrorIs(t, results[0].Err, producer.ErrInvalid)
			require.ErrorIs(t, results[0].Err, producer.ErrInvalidTenant)
			var te *producer.TenantError
			require.ErrorAs(t, results[0].Err, &te)
			require.Equal(t, tc.tenant, te.Tenant)
			require.Contains(t, results[0].Err.Error(), "cannot be a MessageGroupId")
			require.NoError(t, results[1].Err)
			require.Equal(t, map[string]string{good.IdempotencyKey: "acme"}, f.sentGroups(t), "the refused message is not sent")
		})
	}
}

// On a FIFO queue the MessageGroupId stays the order group (GroupID: the
// aggregate id by default); the tenant is not sent.
func TestSendTenantFIFOUnchanged(t *testing.T) {
	f := newTenantFixture(t, true)
	p := f.producer(t, producer.Config{Tenant: func(*envelope.Envelope) string { return "acct-config" }})
	a, b := order("a", 0), order("b", 0)
	a.Tenant = "acct-own"
	_, err := p.Send(context.Background(), a, b)
	require.NoError(t, err)
	require.Equal(t, map[string]string{a.IdempotencyKey: "a", b.IdempotencyKey: "b"}, f.sentGroups(t))
	for _, s := range f.groups.Sent(f.env.Queues.URL) {
		require.NotEmpty(t, aws.ToString(s.GroupID))
	}
}
