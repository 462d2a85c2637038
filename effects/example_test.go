package effects_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/effects"
	"github.com/ddbworker/ddbworker/inbox"
)

// A handler that charges a card: the effect log makes the charge at most
// once per work item (the provider gets the effect key as its idempotency
// key), and the order records the charge in the same transaction that
// ties the effect to the work and completes the inbox record.
func ExampleLog_Do() {
	var ddb *dynamodb.Client // the daemon's client (daemon.Env.DynamoDB)
	store := inbox.Store{Table: "orders"}
	log, err := effects.New(ddb, effects.Config{Inbox: store})
	if err != nil {
		panic(err)
	}
	type payment struct {
		OrderID string `json:"orderId"`
		Cents   int64  `json:"cents"`
		Card    string `json:"card"`
	}
	handler := ddbworker.JSON(func(ctx context.Context, msg *ddbworker.Message, p payment) (ddbworker.Result, error) {
		eff, err := log.Do(ctx, msg, effects.Call{
			Name: "charge", Provider: "payments", Operation: "charge",
			Request: p, Idempotent: true, // the provider deduplicates by Idempotency-Key
		}, func(ctx context.Context, key string) (effects.Outcome, error) {
			// POST the charge with the header Idempotency-Key: key, and map the
			// answer: 200 → Outcome{Ref: charge id}; 402 → Refused(code, msg);
			// 429/503 → NotDone(err); a timeout or a 5xx → return the error.
			return chargeCard(ctx, key, p.Card, p.Cents)
		})
		var ee *effects.EffectError
		if errors.As(err, &ee) && errors.Is(err, effects.ErrRefused) {
			// Declined: record it in the order instead of failing the work.
			return ddbworker.Apply(ee.Effect.Write(),
				ddbworker.Update("orders", ddbworker.Key{"PK": "ORDER#" + p.OrderID, "SK": "ORDER"}).Set("payment", "DECLINED")), nil
		}
		if err != nil {
			return ddbworker.Result{}, err // UNKNOWN, mismatch, … carry their codes
		}
		return ddbworker.Apply(eff.Write(),
			ddbworker.Update("orders", ddbworker.Key{"PK": "ORDER#" + p.OrderID, "SK": "ORDER"}).
				Set("payment", "PAID").Set("chargeId", eff.ProviderRef)), nil
	})
	_ = handler
}

func chargeCard(ctx context.Context, key, card string, cents int64) (effects.Outcome, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://payments.example/charges", nil)
	if err != nil {
		return effects.Outcome{}, effects.NotDone(err)
	}
	req.Header.Set("Idempotency-Key", key)
	_, _ = card, cents
	return effects.Outcome{Ref: "ch_1"}, nil
}

// The effect key names one effect of one work item; it is what the
// provider receives as its idempotency key.
func ExampleKey() {
	key := effects.Key("OrderPaymentRequested", "order-42:payment", "charge")
	fmt.Println(key)
	fmt.Println(effects.HashedKey(key)) // for providers whose keys are short
	// Output:
	// OrderPaymentRequested/order-42:payment/charge
	// Syz7dHxm7XwyR3UejiR7Z6JZKBQMpTXsLfNVKMumolc
}
