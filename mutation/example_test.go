package mutation_test

import (
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/mutation"
	"github.com/ddbworker/ddbworker/tables"
)

func caseKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "CASE#" + id},
		"SK": &types.AttributeValueMemberS{Value: "STATE"},
	}
}

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

// A stage change that must never roll a case back: the write applies only
// while the stored version is absent or older; a late, older message is
// superseded instead of overwriting newer state.
func ExampleNewerVersion() {
	cond := mutation.NewerVersion("version", 7)
	upd := expression.Set(expression.Name("stage"), expression.Value("ESCALATED")).
		Set(expression.Name("version"), expression.Value(7))
	w, err := mutation.Update("app", caseKey("c-1"), upd, &cond, mutation.Superseded(""))
	if err != nil {
		panic(err)
	}
	u := w.Item.Update
	fmt.Println(aws.ToString(u.ConditionExpression))
	fmt.Println(names(u.ExpressionAttributeNames))
	fmt.Println(u.ReturnValuesOnConditionCheckFailure)
	v := w.Guard(map[string]types.AttributeValue{"version": &types.AttributeValueMemberN{Value: "9"}})
	fmt.Println(kind(v.Kind), v.Outcome)
	// Output:
	// (attribute_not_exists (#0)) OR (#0 < :0)
	// #0=version #1=stage
	// ALL_OLD
	// supersede SUPERSEDED
}

// A ledger entry is written once: create-only, and a second attempt to
// write it is a terminal duplicate.
func ExampleCreateOnly() {
	item := map[string]types.AttributeValue{
		"PK":     &types.AttributeValueMemberS{Value: "CASE#c-1"},
		"SK":     &types.AttributeValueMemberS{Value: "LEDGER#0001"},
		"amount": &types.AttributeValueMemberN{Value: "250"},
	}
	cond := mutation.CreateOnly(tables.DefaultLayout().PartitionKey)
	w, err := mutation.Put("app", item, &cond, mutation.Terminal("DUPLICATE_ENTRY", "ledger entry exists"))
	if err != nil {
		panic(err)
	}
	p := w.Item.Put
	fmt.Println(aws.ToString(p.ConditionExpression), names(p.ExpressionAttributeNames))
	fmt.Println(p.ExpressionAttributeValues == nil)
	v := w.Guard(item)
	fmt.Println(kind(v.Kind), v.Code)
	// Output:
	// attribute_not_exists (#0) #0=PK
	// true
	// fail DUPLICATE_ENTRY
}

// One condition both requires the case and checks its version; IfMissing
// tells the two failures apart from the item the failed condition returned.
func ExampleIfMissing() {
	cond := mutation.MustExist(tables.DefaultLayout().PartitionKey).And(mutation.ExpectVersion("version", 3))
	guard := mutation.IfMissing(mutation.Terminal("CASE_NOT_FOUND", "no such case"), mutation.RetryConflict())
	w, err := mutation.Check("app", caseKey("c-1"), cond, guard)
	if err != nil {
		panic(err)
	}
	fmt.Println(aws.ToString(w.Item.ConditionCheck.ConditionExpression))

	missing := w.Guard(nil)
	fmt.Println(kind(missing.Kind), missing.Code)
	present := w.Guard(map[string]types.AttributeValue{"version": &types.AttributeValueMemberN{Value: "4"}})
	fmt.Println(kind(present.Kind))
	// Output:
	// (attribute_exists (#0)) AND (#1 = :0)
	// fail CASE_NOT_FOUND
	// retry
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
