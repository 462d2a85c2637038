package ddbworker_test

import (
	"context"
	"fmt"

	"github.com/ddbworker/ddbworker"
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

	// The worker commits the write alone, with the work's key, type and
	// request hash stamped beside stageVersion (ddbworkerKey_stageVersion,
	// ddbworkerType_stageVersion, ddbworkerHash_stageVersion): a redelivery
	// that finds them is a duplicate, without an inbox record.

	// Output:
	// single write: true
}
