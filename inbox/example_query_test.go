package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbworker/ddbworker/inbox"
)

// An operator's reads: one work item, then every terminal failure of the
// last hour with one code, page by page. (Needs a database: not run.)
func ExampleReader() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	r, err := inbox.NewReader(dynamodb.NewFromConfig(cfg), inbox.ReaderConfig{Store: inbox.Store{Table: "ddbworker"}})
	if err != nil {
		log.Fatal(err)
	}

	recs, err := r.Get(ctx, "case-42:stage:7", "")
	switch {
	case errors.Is(err, inbox.ErrNotFound):
		fmt.Println("never seen")
	case err != nil:
		log.Fatal(err)
	}
	for _, rec := range recs {
		fmt.Println(rec.MessageType, rec.Status, rec.Outcome, rec.FailureCode)
	}

	f := inbox.AttentionFilter{Since: time.Now().Add(-time.Hour), Code: "HANDLER_ERROR"}
	p := inbox.Page{Limit: 100}
	for {
		l, err := r.ListAttention(ctx, inbox.StatusFailedTerminal, f, p)
		if err != nil {
			log.Fatal(err)
		}
		for _, rec := range l.Records {
			fmt.Println(rec.FailedAt, rec.Key, rec.FailureMessage)
		}
		if l.Next == "" {
			break
		}
		p.Cursor = l.Next
	}
}
