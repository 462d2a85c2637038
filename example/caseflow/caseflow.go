package caseflow

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/mutation"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
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
)

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

// CaseKey is the primary key of a case item.
func CaseKey(caseID string) map[string]types.AttributeValue {
	return key("CASE#"+caseID, "CASE")
}

// DeadlineKey is the primary key of a case's deadline item for stage.
func DeadlineKey(caseID, stage string) map[string]types.AttributeValue {
	return key("CASE#"+caseID, "DEADLINE#"+stage)
}

// LedgerKey is the primary key of a ledger entry.
func LedgerKey(caseID, sourceEventID string) map[string]types.AttributeValue {
	return key("CASE#"+caseID, "LEDGER#"+sourceEventID)
}

// ApplicationKey is the primary key of a work item's application counter.
func ApplicationKey(caseID, messageType, idempotencyKey string) map[string]types.AttributeValue {
	return key("CASE#"+caseID, "APPLIED#"+messageType+"#"+idempotencyKey)
}

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		tables.AttrPK: &types.AttributeValueMemberS{Value: pk},
		tables.AttrSK: &types.AttributeValueMemberS{Value: sk},
	}
}

// Handlers are the domain's handlers.
type Handlers struct {
	// Table holds the case items. Required.
	Table string
	// TrackApplications adds an application counter per work item to every
	// commit (one more write), so double applies are visible. Default: false.
	TrackApplications bool
}

// Register routes the three message types to h.
func (h *Handlers) Register(reg *worker.Registry, opts ...worker.RouteOption) error {
	if h.Table == "" {
		return errors.New("caseflow: Handlers.Table is required")
	}
	return errors.Join(
		reg.Register(TypeDeadline, worker.JSON(h.Deadline), opts...),
		reg.Register(TypeStageChanged, worker.JSON(h.StageChanged), opts...),
		reg.Register(TypeLedger, worker.JSON(h.Ledger), opts...),
		reg.Register(TypeNote, worker.JSON(h.Note), opts...),
	)
}

var caseMissing = mutation.Terminal(CodeCaseNotFound, "the case does not exist")

// Deadline handles CaseDeadlineCalculationRequested.
func (h *Handlers) Deadline(_ context.Context, msg *worker.Message, p DeadlineRequested) (worker.Result, error) {
	sla, ok := SLA(p.Stage)
	if !ok {
		return worker.Result{}, failure.NewTerminal(CodeUnknownStage, fmt.Sprintf("stage %q has no SLA", p.Stage))
	}
	deadline := p.EffectiveAt.Add(sla).UTC().Format(time.RFC3339)
	upd := expression.Set(expression.Name(AttrDeadlineAt), expression.Value(deadline)).
		Set(expression.Name(AttrDeadlineStage), expression.Value(p.Stage)).
		Add(expression.Name(AttrDeadlineVersion), expression.Value(1))
	exists := mutation.MustExist(tables.AttrPK)
	caseWrite, err := mutation.Update(h.Table, CaseKey(p.CaseID), upd, &exists, caseMissing)
	if err != nil {
		return worker.Result{}, err
	}
	item := DeadlineKey(p.CaseID, p.Stage)
	item[AttrCaseID] = &types.AttributeValueMemberS{Value: p.CaseID}
	item[AttrStage] = &types.AttributeValueMemberS{Value: p.Stage}
	item[AttrDeadlineAt] = &types.AttributeValueMemberS{Value: deadline}
	item[AttrEffectiveAt] = &types.AttributeValueMemberS{Value: p.EffectiveAt.UTC().Format(time.RFC3339Nano)}
	deadlineWrite, err := mutation.Put(h.Table, item, nil, nil)
	if err != nil {
		return worker.Result{}, err
	}
	return h.result(msg, p.CaseID, caseWrite, deadlineWrite)
}

// StageChanged handles CaseStageChanged: the stage moves only forward in
// version; an older version completes as SUPERSEDED.
func (h *Handlers) StageChanged(_ context.Context, msg *worker.Message, p StageChanged) (worker.Result, error) {
	if msg.Envelope.AggregateVersion == nil {
		return worker.Result{}, failure.NewTerminal(CodeInvalidPayload, "CaseStageChanged needs aggregateVersion")
	}
	if _, ok := SLA(p.Stage); !ok || p.CaseID == "" {
		return worker.Result{}, failure.NewTerminal(CodeUnknownStage, fmt.Sprintf("stage %q is not a known stage", p.Stage))
	}
	v := *msg.Envelope.AggregateVersion
	upd := expression.Set(expression.Name(AttrStage), expression.Value(p.Stage)).
		Set(expression.Name(AttrStageVersion), expression.Value(v))
	cond := mutation.MustExist(tables.AttrPK).And(mutation.NewerVersion(AttrStageVersion, v))
	w, err := mutation.Update(h.Table, CaseKey(p.CaseID), upd, &cond, mutation.IfMissing(caseMissing, mutation.Superseded("")))
	if err != nil {
		return worker.Result{}, err
	}
	return h.result(msg, p.CaseID, w)
}

// Ledger handles LedgerEntryRequested: one entry per source event.
func (h *Handlers) Ledger(_ context.Context, msg *worker.Message, p LedgerEntry) (worker.Result, error) {
	item := LedgerKey(p.CaseID, p.SourceEventID)
	item[AttrCaseID] = &types.AttributeValueMemberS{Value: p.CaseID}
	item[AttrAmountCents] = &types.AttributeValueMemberN{Value: fmt.Sprint(p.AmountCents)}
	item[AttrCurrency] = &types.AttributeValueMemberS{Value: p.Currency}
	createOnly := mutation.CreateOnly(tables.AttrPK)
	entry, err := mutation.Put(h.Table, item, &createOnly, mutation.Superseded(OutcomeAlreadyRecorded))
	if err != nil {
		return worker.Result{}, err
	}
	exists := mutation.MustExist(tables.AttrPK)
	balance, err := mutation.Update(h.Table, CaseKey(p.CaseID),
		expression.Add(expression.Name(AttrBalanceCents), expression.Value(p.AmountCents)), &exists, caseMissing)
	if err != nil {
		return worker.Result{}, err
	}
	return h.result(msg, p.CaseID, entry, balance)
}

// NoteUpdate is the update CaseNoteRecorded applies to the case item; the
// benchmark's baseline and bare loops issue exactly this update.
func NoteUpdate(p NoteRecorded) expression.UpdateBuilder {
	return expression.Set(expression.Name(AttrLastNote), expression.Value(p.Note)).
		Add(expression.Name(AttrNoteCount), expression.Value(1))
}

// Note handles CaseNoteRecorded: one guarded update of the case item.
func (h *Handlers) Note(_ context.Context, msg *worker.Message, p NoteRecorded) (worker.Result, error) {
	exists := mutation.MustExist(tables.AttrPK)
	w, err := mutation.Update(h.Table, CaseKey(p.CaseID), NoteUpdate(p), &exists, caseMissing)
	if err != nil {
		return worker.Result{}, err
	}
	return h.result(msg, p.CaseID, w)
}

// NewNote builds a CaseNoteRecorded envelope.
func NewNote(key, caseID, note string) (*envelope.Envelope, error) {
	return newEnvelope(key, TypeNote, caseID, NoteRecorded{CaseID: caseID, Note: note}, nil)
}

func (h *Handlers) result(msg *worker.Message, caseID string, writes ...mutation.Write) (worker.Result, error) {
	if h.TrackApplications {
		w, err := mutation.Update(h.Table, ApplicationKey(caseID, msg.Envelope.MessageType, msg.Envelope.IdempotencyKey),
			expression.Add(expression.Name(AttrApplications), expression.Value(1)), nil, nil)
		if err != nil {
			return worker.Result{}, err
		}
		writes = append(writes, w)
	}
	return worker.Result{Writes: writes}, nil
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
