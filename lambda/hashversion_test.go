package lambda_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/invoices"
	"github.com/ddbworker/ddbworker/lambda"
)

// At cold start the adapter takes the request hash version the table
// records, as the other settings: a table recorded v3 is written v3; a
// record of an earlier release (no version) is written v2, which a
// function version of that release running beside this one reads; a
// variable that says otherwise than the record is refused.
func TestNewWritesTheRecordedHashVersion(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		version int // recorded; 0: a record of an earlier release, without it
		want    string
	}{
		{"recorded v3", 3, "v3:"},
		{"recorded v2", 2, "v2:"},
		{"an earlier release's record", 0, "v2:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			require.NoError(t, inbox.RecordSettings(ctx, w.env.DynamoDB, inbox.Store{Table: w.env.Table, RequestHashVersion: tc.version}, "ops"))
			if tc.version == 0 {
				rm, err := expression.NewBuilder().WithUpdate(expression.Remove(expression.Name(string(inbox.SettingRequestHash)))).Build()
				require.NoError(t, err)
				_, err = w.env.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(w.env.Table),
					Key: map[string]ddbtypes.AttributeValue{"PK": &ddbtypes.AttributeValueMemberS{Value: "DDBWORKER#CONFIG"},
						"SK": &ddbtypes.AttributeValueMemberS{Value: "INBOX"}},
					UpdateExpression: rm.Update(), ExpressionAttributeNames: rm.Names()})
				require.NoError(t, err)
			}
			handle, err := lambda.New(ctx, registerInvoices, lookup(w.functionEnv(true)))
			require.NoError(t, err)
			const key = "k-hash-1"
			w.send(request(t, key, invoices.InvoiceRequested{OrderID: "o-none", AmountCents: 1, Currency: "EUR"}))
			_, err = handle(ctx, w.receive(1, time.Minute))
			require.NoError(t, err)
			rec := w.inboxRecord(key)
			require.True(t, strings.HasPrefix(rec.RequestHash, tc.want), "recorded %q, want %s", rec.RequestHash, tc.want)

			if tc.version != 0 {
				env := w.functionEnv(true)
				env["DDBWORKER_REQUEST_HASH_VERSION"] = map[int]string{2: "v3", 3: "v2"}[tc.version]
				_, err = lambda.New(ctx, registerInvoices, lookup(env))
				require.ErrorContains(t, err, "DDBWORKER_REQUEST_HASH_VERSION is "+env["DDBWORKER_REQUEST_HASH_VERSION"]+" but table "+w.env.Table+" records v")
			}
		})
	}
	_, err := lambda.New(ctx, registerInvoices, lookup(map[string]string{"DDBWORKER_TABLE": "t", "DDBWORKER_TERMINAL_POLICY": "quarantine",
		"DDBWORKER_REQUEST_HASH_VERSION": "v9"}))
	require.ErrorContains(t, err, `DDBWORKER_REQUEST_HASH_VERSION="v9": must be v2 or v3`)
}
