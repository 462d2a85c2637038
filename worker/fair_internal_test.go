package worker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/inbox"
)

// A write of a quiet tenant waits behind the write holding the turn and
// one turn of a busy tenant with a backlog queued for the budget, not the
// backlog (a rate.Limiter alone reserves in arrival order).
func TestFairPacerServesAQuietTenantNext(t *testing.T) {
	lim := rate.NewLimiter(rate.Limit(2), 1)
	p := newFairPacer(lim)
	ctx := context.Background()
	require.NoError(t, p.waitN(ctx, "A", 1, time.Now)) // the burst: from here on writes wait
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	write := func(tenant string) {
		defer wg.Done()
		require.NoError(t, p.waitN(ctx, tenant, 1, time.Now))
		mu.Lock()
		order = append(order, tenant)
		mu.Unlock()
	}
	waiting := func(tenant string, n int) func() bool {
		return func() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.waiting.Waiting(tenant) >= n }
	}
	for range 20 {
		wg.Add(1)
		go write("A") // one holds the turn (half a second), the rest queue
	}
	require.Eventually(t, waiting("A", 10), 5*time.Second, time.Millisecond)
	wg.Add(1)
	go write("B")
	require.Eventually(t, waiting("B", 1), 5*time.Second, time.Millisecond)
	mu.Lock()
	before := len(order)
	mu.Unlock()
	lim.SetLimit(rate.Limit(1000)) // the rest need not take ten seconds
	wg.Wait()
	require.Len(t, order, 21)
	at := slices.Index(order, "B")
	require.LessOrEqual(t, at-before, 2, "B's write waits behind the A write holding the turn and at most one turn of A's, not the backlog: %v", order)
}

// A waiter that gives up leaves the queue; the turn goes on.
func TestFairPacerCancelled(t *testing.T) {
	p := newFairPacer(rate.NewLimiter(rate.Every(time.Hour), 1))
	require.NoError(t, p.waitN(context.Background(), "A", 1, time.Now)) // the burst
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, p.waitN(ctx, "A", 1, time.Now), context.DeadlineExceeded, "an hour's wait ends with its context")
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	require.ErrorIs(t, p.waitN(ctx2, "B", 1, time.Now), context.DeadlineExceeded)
	p.mu.Lock()
	defer p.mu.Unlock()
	require.False(t, p.busy, "nobody holds the turn")
}

// The dwell metric names at most NamedTenants tenants at a time — the
// first ones, then the busiest of each window — and the rest "other".
func TestDwellNamesAreBounded(t *testing.T) {
	dn := newDwellNames(2)
	now := time.Now()
	require.Equal(t, "t1", dn.label("t1", now))
	require.Equal(t, "t2", dn.label("t2", now))
	labels := map[string]bool{}
	for i := range 100 {
		labels[dn.label(fmt.Sprintf("x%d", i%10), now)] = true
		dn.label("busy", now)
		dn.label("busy", now)
	}
	require.Equal(t, map[string]bool{OtherTenants: true}, labels)
	require.Equal(t, OtherTenants, dn.label("busy", now))
	next := now.Add(dwellWindow)
	require.Equal(t, "busy", dn.label("busy", next), "the busiest of the last window is named")
	require.Equal(t, OtherTenants, dn.label("t1", next), "a quiet one is not")
}

// Holding: with one tenant nothing is held; a second tenant caps the
// first at its share, and held units start by round robin as the cap
// allows.
func TestTenantsHoldAtTheShare(t *testing.T) {
	ts := newTenants(FairConfig{TenantShare: 0.5, MaxHeld: 10})
	now := time.Now()
	one := func() []*delivery { return []*delivery{{}} }
	for range 4 {
		require.True(t, ts.admit("A", one(), 4, now), "alone, A takes the whole limit")
	}
	require.True(t, ts.admit("B", one(), 4, now), "a tenant with nothing in flight always starts")
	require.False(t, ts.admit("A", one(), 4, now), "A is over its share while B is in flight")
	require.Nil(t, ts.next(4), "A stays held while over its share")
	ts.done("A", 2)
	require.Nil(t, ts.next(4), "A at 2 of 4 is at its share")
	ts.done("A", 1)
	u := ts.next(4)
	require.NotNil(t, u)
	require.Equal(t, "A", u.tenant)
	require.Zero(t, ts.heldCount())
}

// A route's tenant field names the tenant of a message without a group
// id; the group id wins; neither is the default tenant.
func TestTenantOf(t *testing.T) {
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register("OrderPlaced", ddbworker.HandlerFunc(func(context.Context, *ddbworker.Message) (ddbworker.Result, error) {
		return ddbworker.Result{}, nil
	}), ddbworker.Tenant("customerId")))
	w, err := New(Deps{DynamoDB: &dynamodb.Client{}, SQS: &sqs.Client{}, Handlers: reg},
		Config{Store: inbox.Store{Table: "t"}, QueueURL: "https://sqs/q", TerminalPolicy: PolicyQuarantine})
	require.NoError(t, err)
	body := func(payload string) *string {
		return aws.String(`{"messageId":"m1","schemaVersion":1,"messageType":"OrderPlaced","producer":"p","occurredAt":"2025-01-01T00:00:00Z",` +
			`"idempotencyKey":"k1","aggregateType":"Order","aggregateId":"o1","correlationId":"c1","payload":` + payload + `}`)
	}
	for _, tc := range []struct {
		name, group, payload, want string
	}{
		{"the route's field", "", `{"customerId":"cust-7"}`, "cust-7"},
		{"a number", "", `{"customerId":42}`, "42"},
		{"the group id wins", "g1", `{"customerId":"cust-7"}`, "g1"},
		{"neither", "", `{"other":1}`, DefaultTenant},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := types.Message{MessageId: aws.String("m1"), Body: body(tc.payload), Attributes: map[string]string{}}
			if tc.group != "" {
				m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)] = tc.group
			}
			require.Equal(t, tc.want, w.tenantOf(newDelivery(m, time.Now())))
		})
	}
	require.Error(t, ddbworker.NewRegistry().Register("X", ddbworker.HandlerFunc(nil), ddbworker.Tenant("")), "a tenant field needs a name")
}
