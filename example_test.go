package ddbworker_test

import (
	"context"
	"fmt"
	"slices"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/mutation"
)

type stageChanged struct {
	CaseID string `json:"caseId"`
	Stage  string `json:"stage"`
}

// A single-write route: the handler's one write, guarded by the
// aggregate's version, is committed alone and fenced in the item.
func ExampleSingleWrite() {
	stage := func(_ context.Context, msg *ddbworker.Message, p stageChanged) (ddbworker.Result, error) {
		v, ok := msg.AggregateVersion()
		if !ok {
			return ddbworker.Result{}, ddbworker.Terminal("VERSION_REQUIRED", "CaseStageChanged needs aggregateVersion")
		}
		return ddbworker.Apply(ddbworker.Update("app", ddbworker.Key{"PK": "CASE#" + p.CaseID, "SK": "CASE"}).
			Set("stage", p.Stage).
			Guard(ddbworker.MustExist(), ddbworker.NewerVersion("stageVersion", v))), nil
	}
	reg := ddbworker.NewRegistry()
	if err := reg.Register("CaseStageChanged", ddbworker.JSON(stage), ddbworker.SingleWrite()); err != nil {
		fmt.Println(err)
		return
	}
	rt, _ := reg.Lookup("CaseStageChanged")
	fmt.Println("single write:", rt.SingleWrite)

	// What the worker sends for version 7 of case c1, key k-1 (its type CaseStageChanged).
	w, _ := ddbworker.Update("app", ddbworker.Key{"PK": "CASE#c1", "SK": "CASE"}).Set("stage", "review").
		Guard(ddbworker.MustExist(), ddbworker.NewerVersion("stageVersion", 7)).Mutation()
	fenced, err := mutation.Fenced([]mutation.Write{w}, mutation.Stamp{Key: "k-1", Type: "CaseStageChanged", Hash: "v2:…"})
	if err != nil {
		fmt.Println(err)
		return
	}
	var names []string
	for _, n := range fenced.Item.Update.ExpressionAttributeNames {
		names = append(names, n)
	}
	slices.Sort(names)
	fmt.Println("sets and reads:", names)
	// Output:
	// single write: true
	// sets and reads: [PK ddbworkerHash_stageVersion ddbworkerKey_stageVersion ddbworkerType_stageVersion stage stageVersion]
}
