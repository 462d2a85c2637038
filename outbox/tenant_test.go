package outbox_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/attr"
	"github.com/ddbworker/ddbworker/outbox"
	"github.com/ddbworker/ddbworker/tables"
)

// An event's tenant is stored on its record (AttrOutboxTenant), read back
// by Decode for the relay; none is stored without one; a tenant SQS would
// refuse as a MessageGroupId is refused with the producer's transaction,
// naming the field.
func TestRecordKeepsTheTenant(t *testing.T) {
	w, err := outbox.New(outbox.Config{Table: "orders"})
	require.NoError(t, err)
	ctx := context.Background()
	put, err := w.Put(ctx, outbox.Event{Envelope: newEnvelope("m-1", "o-1", ptr(int64(1))), Tenant: "acct-42"})
	require.NoError(t, err)
	require.Equal(t, &types.AttributeValueMemberS{Value: "acct-42"}, put.Put.Item[attr.OutboxTenant])
	rec, err := outbox.Decode(put.Put.Item, tables.DefaultLayout())
	require.NoError(t, err)
	require.Equal(t, "acct-42", rec.Tenant)

	put, err = w.Put(ctx, outbox.Event{Envelope: newEnvelope("m-2", "o-1", ptr(int64(2)))})
	require.NoError(t, err)
	require.NotContains(t, put.Put.Item, attr.OutboxTenant)
	rec, err = outbox.Decode(put.Put.Item, tables.DefaultLayout())
	require.NoError(t, err)
	require.Empty(t, rec.Tenant)

	for _, bad := range []string{"acme corp", strings.Repeat("x", 129), "müller"} {
		_, err := w.Put(ctx, outbox.Event{Envelope: newEnvelope("m-3", "o-1", ptr(int64(3))), Tenant: bad})
		require.ErrorIs(t, err, outbox.ErrInvalid, bad)
		var ie *outbox.InvalidError
		require.ErrorAs(t, err, &ie)
		require.Equal(t, "Tenant", ie.Field)
		require.Contains(t, ie.Reason, "MessageGroupId")
	}
}
