package mutation_test

import (
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/writes"
	"github.com/ddbworker/ddbworker/mutation"
)

// names prints an expression's attribute names in a stable order.
func names(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = k + "=" + m[k]
	}
	return strings.Join(pairs, " ")
}

func kind(k mutation.VerdictKind) string {
	switch k {
	case mutation.Supersede:
		return "supersede"
	case mutation.Retry:
		return "retry"
	case mutation.Fail:
		return "fail"
	}
	return "?"
}

// A stage change that must never roll a case back, as the engine gets it
// from the front door: the transaction item (the condition built through
// the expression builder, the item as it was returned when it fails) and
// the judge of its guards. A late, older message is superseded instead of
// overwriting newer state.
func ExampleWrite() {
	w, err := writes.Mutation(ddbworker.Update("app", ddbworker.Key{"PK": "CASE#c-1", "SK": "STATE"}).
		Set("stage", "ESCALATED").Set("version", 7).
		Guard(ddbworker.NewerVersion("version", 7)))
	if err != nil {
		panic(err)
	}
	u := w.Item.Update
	fmt.Println(aws.ToString(u.ConditionExpression))
	fmt.Println(names(u.ExpressionAttributeNames))
	fmt.Println(u.ReturnValuesOnConditionCheckFailure)
	v, failed := w.Judge(map[string]types.AttributeValue{"version": &types.AttributeValueMemberN{Value: "9"}})
	fmt.Println(failed, kind(v.Kind))
	// Output:
	// (attribute_not_exists (#0)) OR (#0 < :0)
	// #0=version #1=stage
	// ALL_OLD
	// true supersede
}

// One condition both requires the case and checks its version; the judge
// tells the two failures apart from the item the failed condition returned,
// and says when no guard fails on it (the item changed since: the commit
// re-runs the handler).
func ExampleJudge() {
	w, err := writes.Mutation(ddbworker.Check("app", ddbworker.Key{"PK": "CASE#c-1", "SK": "STATE"},
		ddbworker.MustExist().Else(ddbworker.Fail("CASE_NOT_FOUND", "no such case")), ddbworker.ExpectVersion("version", 3)))
	if err != nil {
		panic(err)
	}
	fmt.Println(aws.ToString(w.Item.ConditionCheck.ConditionExpression))
	version := func(v string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "CASE#c-1"}, "version": &types.AttributeValueMemberN{Value: v}}
	}
	for _, old := range []map[string]types.AttributeValue{nil, version("4"), version("3")} {
		if v, failed := w.Judge(old); failed {
			fmt.Println(strings.TrimSpace(kind(v.Kind) + " " + v.Code))
		} else {
			fmt.Println("no guard fails")
		}
	}
	// Output:
	// (attribute_exists (#0)) AND (#1 = :0)
	// fail CASE_NOT_FOUND
	// retry
	// no guard fails
}

// The commit's ClientRequestToken: stable for one lease and handler run, so
// an SDK retry after a lost response is applied once; a new run or a new
// lease gets another token.
func ExampleRequestToken() {
	l := inbox.Lease{Key: "case-c-1-escalation-7", MessageType: "CaseEscalated", Token: "5f0c6a9e2b7d4e1f8a3c0b9d6e2f1a4c"}
	first := mutation.RequestToken(l, 0)
	fmt.Println(len(first), first == mutation.RequestToken(l, 0), first == mutation.RequestToken(l, 1))
	// Output: 36 true false
}
