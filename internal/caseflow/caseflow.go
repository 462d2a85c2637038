package caseflow

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
)

// Message types, aggregate type, codes and outcomes of the domain.
const (
	TypeDeadline     = "CaseDeadlineCalculationRequested"
	TypeStageChanged = "CaseStageChanged"
	TypeLedger       = "LedgerEntryRequested"
	TypeNote         = "CaseNoteRecorded"
	AggregateType    = "Case"
	Producer         = "caseflow-example"

	CodeCaseNotFound   = "CASE_NOT_FOUND"
	CodeInvalidPayload = failure.CodeInvalidPayload
	CodeUnknownStage   = "UNKNOWN_STAGE"

	OutcomeAlreadyRecorded = "ALREADY_RECORDED"
)

// Domain attribute names.
const (
	AttrCaseID          = "caseId"
	AttrStage           = "stage"
	AttrStageVersion    = "stageVersion"
	AttrDeadlineAt      = "deadlineAt"
	AttrDeadlineStage   = "deadlineStage"
	AttrDeadlineVersion = "deadlineVersion"
	AttrBalanceCents    = "balanceCents"
	AttrEffectiveAt     = "effectiveAt"
	AttrAmountCents     = "amountCents"
	AttrCurrency        = "currency"
	AttrApplications    = "applications"
	AttrLastNote        = "lastNote"
	AttrNoteCount       = "noteCount"
	AttrNoteVersion     = "noteVersion"
	// AttrStageApplications prefixes the application counter of one stage
	// version inside its case item (see Handlers.SingleWriteStages).
	AttrStageApplications = "stageApplied"
)

// StageApplicationsAttr is the case item's attribute that counts the
// applications of stage version v under Handlers.SingleWriteStages with
// TrackApplications: a version is one work item of its case.
func StageApplicationsAttr(v int64) string { return AttrStageApplications + strconv.FormatInt(v, 10) }

// SLA is the time allowed per stage.
var slaHours = map[string]int{"intake": 48, "review": 120, "decision": 240, "appeal": 720}

// Stages lists the known stages in order.
func Stages() []string { return []string{"intake", "review", "decision", "appeal"} }

// SLA returns the time allowed in stage.
func SLA(stage string) (time.Duration, bool) {
	h, ok := slaHours[stage]
	return time.Duration(h) * time.Hour, ok
}

// DeadlineRequested is the payload of CaseDeadlineCalculationRequested.
type DeadlineRequested struct {
	CaseID      string    `json:"caseId"`
	Stage       string    `json:"stage"`
	EffectiveAt time.Time `json:"effectiveAt"`
}

// Validate is called by worker.JSON after decoding.
func (p DeadlineRequested) Validate() error {
	if p.CaseID == "" || p.EffectiveAt.IsZero() {
		return errors.New("caseId and effectiveAt are required")
	}
	return nil
}

// StageChanged is the payload of CaseStageChanged (the version is the
// envelope's aggregateVersion).
type StageChanged struct {
	CaseID string `json:"caseId"`
	Stage  string `json:"stage"`
}

// LedgerEntry is the payload of LedgerEntryRequested.
type LedgerEntry struct {
	CaseID        string `json:"caseId"`
	SourceEventID string `json:"sourceEventId"`
	AmountCents   int64  `json:"amountCents"`
	Currency      string `json:"currency"`
}

// Validate is called by worker.JSON after decoding.
func (p LedgerEntry) Validate() error {
	if p.CaseID == "" || p.SourceEventID == "" {
		return errors.New("caseId and sourceEventId are required")
	}
	return nil
}

// NoteRecorded is the payload of CaseNoteRecorded: the benchmark's message,
// one update of one case item that the note makes about 1 KB.
type NoteRecorded struct {
	CaseID string `json:"caseId"`
	Note   string `json:"note"`
}

// Validate is called by worker.JSON after decoding.
func (p NoteRecorded) Validate() error {
	if p.CaseID == "" {
		return errors.New("caseId is required")
	}
	return nil
}

// Key attributes of the example table (ddbworker's default layout: the
// domain's items live beside the inbox records).
const (
	AttrPK = "PK"
	AttrSK = "SK"
)

// caseKey, deadlineKey, ledgerKey and applicationKey are the items' keys as
// a handler writes them.
func caseKey(caseID string) ddbworker.Key {
	return ddbworker.Key{AttrPK: "CASE#" + caseID, AttrSK: "CASE"}
}
func deadlineKey(caseID, stage string) ddbworker.Key {
	return ddbworker.Key{AttrPK: "CASE#" + caseID, AttrSK: "DEADLINE#" + stage}
}
func ledgerKey(caseID, sourceEventID string) ddbworker.Key {
	return ddbworker.Key{AttrPK: "CASE#" + caseID, AttrSK: "LEDGER#" + sourceEventID}
}
func applicationKey(caseID, messageType, idempotencyKey string) ddbworker.Key {
	return ddbworker.Key{AttrPK: "CASE#" + caseID, AttrSK: "APPLIED#" + messageType + "#" + idempotencyKey}
}

// CaseKey is the primary key of a case item, for reading it back.
func CaseKey(caseID string) map[string]types.AttributeValue { return avKey(caseKey(caseID)) }

// DeadlineKey is the primary key of a case's deadline item for stage.
func DeadlineKey(caseID, stage string) map[string]types.AttributeValue {
	return avKey(deadlineKey(caseID, stage))
}

// LedgerKey is the primary key of a ledger entry.
func LedgerKey(caseID, sourceEventID string) map[string]types.AttributeValue {
	return avKey(ledgerKey(caseID, sourceEventID))
}

// ApplicationKey is the primary key of a work item's application counter.
func ApplicationKey(caseID, messageType, idempotencyKey string) map[string]types.AttributeValue {
	return avKey(applicationKey(caseID, messageType, idempotencyKey))
}

func avKey(k ddbworker.Key) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		AttrPK: &types.AttributeValueMemberS{Value: k[AttrPK].(string)},
		AttrSK: &types.AttributeValueMemberS{Value: k[AttrSK].(string)},
	}
}

// Handlers are the domain's handlers.
type Handlers struct {
	// Table holds the case items. Required.
	Table string
	// TrackApplications adds an application counter per work item to every
	// commit (one more write), so double applies are visible. Default: false.
	TrackApplications bool
	// SingleWriteStages registers CaseStageChanged on the single-write
	// route (ddbworker.SingleWrite), whatever Register's options say of the
	// commit (a Fused among them applies to the other types). Its one
	// write cannot carry a second one, so with TrackApplications its
	// application counter is an attribute of the case item that the same
	// update adds to (StageApplicationsAttr of its version), not an item of
	// its own. Default: false.
	SingleWriteStages bool
}

// Register routes the four message types to h.
func (h *Handlers) Register(reg *ddbworker.Registry, opts ...ddbworker.RouteOption) error {
	if h.Table == "" {
		return errors.New("caseflow: Handlers.Table is required")
	}
	stageOpts := opts
	if h.SingleWriteStages {
		stageOpts = append(slices.Clone(opts), func(r *ddbworker.Route) { r.Fused, r.SingleWrite = false, true })
	}
	return errors.Join(
		reg.Register(TypeDeadline, ddbworker.JSON(h.Deadline), opts...),
		reg.Register(TypeStageChanged, ddbworker.JSON(h.StageChanged), stageOpts...),
		reg.Register(TypeLedger, ddbworker.JSON(h.Ledger), opts...),
		reg.Register(TypeNote, ddbworker.JSON(h.Note), opts...),
	)
}

// caseExists guards every write to a case item: a case that does not exist
// ends the work terminal CASE_NOT_FOUND.
func caseExists() ddbworker.Guard {
	return ddbworker.MustExist().Else(ddbworker.Fail(CodeCaseNotFound, "the case does not exist"))
}

// Deadline handles CaseDeadlineCalculationRequested.
func (h *Handlers) Deadline(_ context.Context, msg *ddbworker.Message, p DeadlineRequested) (ddbworker.Result, error) {
	sla, ok := SLA(p.Stage)
	if !ok {
		return ddbworker.Result{}, ddbworker.Terminal(CodeUnknownStage, fmt.Sprintf("stage %q has no SLA", p.Stage))
	}
	deadline := p.EffectiveAt.Add(sla).UTC().Format(time.RFC3339)
	caseWrite := ddbworker.Update(h.Table, caseKey(p.CaseID)).
		Set(AttrDeadlineAt, deadline).Set(AttrDeadlineStage, p.Stage).Add(AttrDeadlineVersion, 1).
		Guard(caseExists())
	deadlineWrite := ddbworker.Put(h.Table, deadlineKey(p.CaseID, p.Stage), ddbworker.Item{
		AttrCaseID: p.CaseID, AttrStage: p.Stage, AttrDeadlineAt: deadline,
		AttrEffectiveAt: p.EffectiveAt.UTC().Format(time.RFC3339Nano),
	})
	return h.result(msg, p.CaseID, caseWrite, deadlineWrite), nil
}

// StageChanged handles CaseStageChanged: the stage moves only forward in
// version; an older version completes as SUPERSEDED.
func (h *Handlers) StageChanged(_ context.Context, msg *ddbworker.Message, p StageChanged) (ddbworker.Result, error) {
	v, ok := msg.AggregateVersion()
	if !ok {
		return ddbworker.Result{}, ddbworker.Terminal(CodeInvalidPayload, "CaseStageChanged needs aggregateVersion")
	}
	if _, ok := SLA(p.Stage); !ok || p.CaseID == "" {
		return ddbworker.Result{}, ddbworker.Terminal(CodeUnknownStage, fmt.Sprintf("stage %q is not a known stage", p.Stage))
	}
	w := ddbworker.Update(h.Table, caseKey(p.CaseID)).Set(AttrStage, p.Stage).Set(AttrStageVersion, v).
		Guard(caseExists(), ddbworker.NewerVersion(AttrStageVersion, v))
	if h.SingleWriteStages {
		if h.TrackApplications {
			w = w.Add(StageApplicationsAttr(v), 1)
		}
		return ddbworker.Apply(w), nil
	}
	return h.result(msg, p.CaseID, w), nil
}

// Ledger handles LedgerEntryRequested: one entry per source event.
func (h *Handlers) Ledger(_ context.Context, msg *ddbworker.Message, p LedgerEntry) (ddbworker.Result, error) {
	entry := ddbworker.Put(h.Table, ledgerKey(p.CaseID, p.SourceEventID), ddbworker.Item{
		AttrCaseID: p.CaseID, AttrAmountCents: p.AmountCents, AttrCurrency: p.Currency,
	}).Guard(ddbworker.CreateOnly().Else(ddbworker.Supersede(OutcomeAlreadyRecorded)))
	balance := ddbworker.Update(h.Table, caseKey(p.CaseID)).Add(AttrBalanceCents, p.AmountCents).Guard(caseExists())
	return h.result(msg, p.CaseID, entry, balance), nil
}

// Note handles CaseNoteRecorded: one guarded update of the case item.
func (h *Handlers) Note(_ context.Context, msg *ddbworker.Message, p NoteRecorded) (ddbworker.Result, error) {
	w := ddbworker.Update(h.Table, caseKey(p.CaseID)).Set(AttrLastNote, p.Note).Add(AttrNoteCount, 1).Guard(caseExists())
	return h.result(msg, p.CaseID, w), nil
}

// NoteInOrder handles CaseNoteRecorded for a case that keeps its newest
// note: the note applies only over an older noteVersion (the envelope's
// aggregateVersion, the note's place among its case's notes); an older one
// arriving late completes as SUPERSEDED. One update of one item under one
// version guard, noteCount its application counter: the shape of the
// single-write route (ddbworker.SingleWrite), on which the benchmark runs
// it.
func (h *Handlers) NoteInOrder(_ context.Context, msg *ddbworker.Message, p NoteRecorded) (ddbworker.Result, error) {
	v, ok := msg.AggregateVersion()
	if !ok {
		return ddbworker.Result{}, ddbworker.Terminal(CodeInvalidPayload, "CaseNoteRecorded in order needs aggregateVersion")
	}
	return ddbworker.Apply(ddbworker.Update(h.Table, caseKey(p.CaseID)).Set(AttrLastNote, p.Note).Add(AttrNoteCount, 1).
		Set(AttrNoteVersion, v).Guard(caseExists(), ddbworker.NewerVersion(AttrNoteVersion, v))), nil
}

// NoteUpdate is the update CaseNoteRecorded applies to the case item; the
// benchmark's baseline and bare loops issue exactly this update.
func NoteUpdate(p NoteRecorded) expression.UpdateBuilder {
	return expression.Set(expression.Name(AttrLastNote), expression.Value(p.Note)).
		Add(expression.Name(AttrNoteCount), expression.Value(1))
}

// NewNote builds a CaseNoteRecorded envelope; version is its
// aggregateVersion, the note's place among its case's notes (Note ignores
// it, NoteInOrder guards by it).
func NewNote(key, caseID, note string, version int64) (*envelope.Envelope, error) {
	return newEnvelope(key, TypeNote, caseID, NoteRecorded{CaseID: caseID, Note: note}, &version)
}

func (h *Handlers) result(msg *ddbworker.Message, caseID string, writes ...ddbworker.Write) ddbworker.Result {
	if h.TrackApplications {
		writes = append(writes, ddbworker.Update(h.Table, applicationKey(caseID, msg.Type(), msg.Key())).Add(AttrApplications, 1))
	}
	return ddbworker.Apply(writes...)
}

// BatchWriteAPI is what SeedCases needs.
type BatchWriteAPI interface {
	BatchWriteItem(ctx context.Context, params *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
}

// SeedCases creates case items (stage intake, version 0) in batches of 25.
func SeedCases(ctx context.Context, api BatchWriteAPI, table string, caseIDs []string) error {
	for start := 0; start < len(caseIDs); start += 25 {
		var reqs []types.WriteRequest
		for _, id := range caseIDs[start:min(start+25, len(caseIDs))] {
			item := CaseKey(id)
			item[AttrCaseID] = &types.AttributeValueMemberS{Value: id}
			item[AttrStage] = &types.AttributeValueMemberS{Value: "intake"}
			item[AttrStageVersion] = &types.AttributeValueMemberN{Value: "0"}
			item[AttrDeadlineVersion] = &types.AttributeValueMemberN{Value: "0"}
			item[AttrBalanceCents] = &types.AttributeValueMemberN{Value: "0"}
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
		}
		in := map[string][]types.WriteRequest{table: reqs}
		for tries := 0; len(in) > 0; tries++ {
			if tries == 10 {
				return fmt.Errorf("caseflow: seed: items still unprocessed after %d tries", tries)
			}
			out, err := api.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: in})
			if err != nil {
				return fmt.Errorf("caseflow: seed: %w", err)
			}
			in = out.UnprocessedItems
		}
	}
	return nil
}

// NewID returns a random identifier with prefix.
func NewID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func newEnvelope(key, messageType, caseID string, payload any, version *int64) (*envelope.Envelope, error) {
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("caseflow: payload: %w", err)
	}
	env := &envelope.Envelope{
		MessageID: NewID("m-"), SchemaVersion: envelope.SchemaV1, MessageType: messageType,
		Producer: Producer, OccurredAt: time.Now().UTC().Truncate(time.Millisecond),
		IdempotencyKey: key, AggregateType: AggregateType, AggregateID: caseID, AggregateVersion: version,
		CorrelationID: NewID("c-"), Payload: raw,
	}
	env.RequestHash, err = envelope.RequestHash(env)
	return env, err
}

// NewDeadlineRequest builds a CaseDeadlineCalculationRequested envelope.
func NewDeadlineRequest(key, caseID, stage string, effectiveAt time.Time) (*envelope.Envelope, error) {
	return newEnvelope(key, TypeDeadline, caseID, DeadlineRequested{CaseID: caseID, Stage: stage, EffectiveAt: effectiveAt.UTC()}, nil)
}

// NewStageChange builds a CaseStageChanged envelope for version.
func NewStageChange(key, caseID, stage string, version int64) (*envelope.Envelope, error) {
	return newEnvelope(key, TypeStageChanged, caseID, StageChanged{CaseID: caseID, Stage: stage}, &version)
}

// NewLedgerEntry builds a LedgerEntryRequested envelope.
func NewLedgerEntry(key, caseID, sourceEventID string, amountCents int64) (*envelope.Envelope, error) {
	return newEnvelope(key, TypeLedger, caseID, LedgerEntry{CaseID: caseID, SourceEventID: sourceEventID, AmountCents: amountCents, Currency: "EUR"}, nil)
}

// Resend returns a copy of env as a producer would resend the same work: a
// new messageId, occurredAt and correlationId, the same key and request.
func Resend(env *envelope.Envelope) *envelope.Envelope {
	c := *env
	c.MessageID = NewID("m-")
	c.OccurredAt = time.Now().UTC().Truncate(time.Millisecond)
	c.CorrelationID = NewID("c-")
	return &c
}
