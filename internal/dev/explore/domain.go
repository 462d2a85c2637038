package explore

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/effects"
	"github.com/ddbworker/ddbworker/envelope"
)

// The domain: every work item adds 1 to its own counter (n_WID) in its
// aggregate's item, guarded by the aggregate's version (one version
// attribute for every type, so that types meet on it), and sets the
// version. A work applied once has n_WID = 1; a superseded one, 0 with
// the item at a newer version.
const (
	aggPrefix   = "AGG#"
	aggSK       = "AGG"
	versionAttr = "ver"
	counterPref = "n_"
	codePoison  = "POISON"
	codeFlaky   = "FLAKY"
)

// payload is what every body carries for the handler (the envelope's
// payload, the adapted bodies' data).
type payload struct {
	WID     string `json:"wid"`
	Agg     string `json:"agg"`
	Version int64  `json:"v"`
	Kind    Kind   `json:"kind"`
	Flaky   int    `json:"flaky,omitempty"`
	Pad     string `json:"pad"`
}

// domain holds the handlers' shared state: how often each work's handler
// ran (a flaky work fails its first runs), and the provider the effect
// route calls (idempotent by key: it does each key once).
type domain struct {
	table    string
	mu       sync.Mutex
	runs     map[string]int
	provider map[string]int // effect key → calls
}

func newDomain(table string) *domain {
	return &domain{table: table, runs: map[string]int{}, provider: map[string]int{}}
}

func (d *domain) run(wid string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.runs[wid]++
	return d.runs[wid]
}

func (d *domain) call(key string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.provider[key]++
	return "ref-" + key
}

// write is the work's one domain write.
func (d *domain) write(p payload) ddbworker.Write {
	return ddbworker.Update(d.table, ddbworker.Key{"PK": aggPrefix + p.Agg, "SK": aggSK}).
		Add(counterPref+p.WID, 1).Set(versionAttr, p.Version).
		Guard(ddbworker.NewerVersion(versionAttr, p.Version))
}

// fail is the handler's business outcome before it writes: poison fails
// for good, flaky fails its first runs.
func (d *domain) fail(p payload) error {
	switch p.Kind {
	case KindPoison:
		return ddbworker.Terminal(codePoison, "poison payload "+p.WID)
	case KindFlaky:
		if n := d.run(p.WID); n <= p.Flaky {
			return ddbworker.Retryable(codeFlaky, fmt.Sprintf("run %d of %s fails (fails %d)", n, p.WID, p.Flaky))
		}
	}
	return nil
}

// registry registers every type with its schedule's mode and body
// adapter; log is the host's effect log.
func (d *domain) registry(s *Schedule, log *effects.Log) (*ddbworker.Registry, error) {
	reg := ddbworker.NewRegistry()
	plain := ddbworker.JSON(func(ctx context.Context, msg *ddbworker.Message, p payload) (ddbworker.Result, error) {
		if err := d.fail(p); err != nil {
			return ddbworker.Result{}, err
		}
		return ddbworker.Apply(d.write(p)), nil
	})
	effect := ddbworker.JSON(func(ctx context.Context, msg *ddbworker.Message, p payload) (ddbworker.Result, error) {
		if err := d.fail(p); err != nil {
			return ddbworker.Result{}, err
		}
		eff, err := log.Do(ctx, msg, effects.Call{Name: "charge", Provider: "explore", Operation: "charge", Request: p.WID, Idempotent: true},
			func(ctx context.Context, key string) (effects.Outcome, error) {
				select {
				case <-time.After(s.ProviderLatency):
				case <-ctx.Done():
					return effects.Outcome{}, ctx.Err() // unclear: called again with the same key
				}
				return effects.Outcome{Ref: d.call(key)}, nil
			})
		if err != nil {
			return ddbworker.Result{}, err
		}
		return ddbworker.Apply(eff.Write(), d.write(p)), nil
	})
	own := func(match string) ddbworker.JSONBody {
		return ddbworker.JSONBody{Match: "src == '" + match + "'", Type: "kind", Key: "key", AggregateType: "'agg'",
			AggregateID: "agg", AggregateVersion: "v", Payload: "data"}
	}
	attr := own("attr")
	attr.Type, attr.TypeAttribute = "", s.TypeAttr
	for _, t := range Types() {
		var opts []ddbworker.RouteOption
		switch s.Modes[t] {
		case Fused:
			opts = append(opts, ddbworker.Fused())
		case SingleWrite:
			opts = append(opts, ddbworker.SingleWrite())
		}
		h := plain
		switch t {
		case TypeEffect:
			h = effect
		case TypeOwn:
			opts = append(opts, ddbworker.Adapt(own("own")))
		case TypeSNS:
			opts = append(opts, ddbworker.Adapt(ddbworker.SNS(own("sns"))))
		case TypeEB:
			opts = append(opts, ddbworker.Adapt(ddbworker.EventBridge{Source: "explore", Key: "detail.key", AggregateType: "'agg'",
				AggregateID: "detail.agg", AggregateVersion: "detail.v", Payload: "detail.data"}))
		case TypeAttr:
			opts = append(opts, ddbworker.Adapt(attr))
		}
		if err := reg.Register(t, h, opts...); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// message is one SQS message of a work item: its body and attributes.
type message struct {
	body  string
	attrs map[string]types.MessageAttributeValue
}

// encode builds a message of w, sent at now (copy numbers the sends of
// one work: the SNS and EventBridge ids differ per send, as a re-publish's
// do).
func encode(s *Schedule, w *Work, now time.Time, copy int) (message, error) {
	p := payload{WID: w.WID, Agg: w.Agg, Version: w.Version, Kind: w.Kind, Flaky: w.Flaky, Pad: w.Pad}
	data, err := json.Marshal(p)
	if err != nil {
		return message{}, err
	}
	m := message{attrs: map[string]types.MessageAttributeValue{}}
	for i := range w.Attrs {
		m.attrs[fmt.Sprintf("p%02d", i)] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(fmt.Sprintf("v%d", i))}
	}
	flat := map[string]any{"key": w.Key, "agg": w.Agg, "v": w.Version, "data": json.RawMessage(data)}
	var body []byte
	switch w.Type {
	case TypeOwn, TypeSNS, TypeAttr:
		flat["src"] = map[string]string{TypeOwn: "own", TypeSNS: "sns", TypeAttr: "attr"}[w.Type]
		if w.Type != TypeAttr {
			flat["kind"] = w.Type
		} else {
			m.attrs[s.TypeAttr] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(w.Type)}
		}
		body, err = json.Marshal(flat)
		if err == nil && w.Type == TypeSNS {
			body, err = json.Marshal(map[string]any{"Type": "Notification", "MessageId": fmt.Sprintf("sns-%s-%d", w.WID, copy),
				"TopicArn": "arn:aws:sns:us-east-1:000000000000:explore", "Message": string(body),
				"Timestamp": now.UTC().Format(time.RFC3339Nano)})
		}
	case TypeEB:
		body, err = json.Marshal(map[string]any{"version": "0", "id": fmt.Sprintf("eb-%s-%d", w.WID, copy), "detail-type": TypeEB,
			"source": "explore", "account": "000000000000", "time": now.UTC().Format(time.RFC3339), "region": "us-east-1",
			"resources": []string{}, "detail": flat})
	default:
		v := w.Version
		env := &envelope.Envelope{MessageID: fmt.Sprintf("m-%s-%d", w.WID, copy), SchemaVersion: 1, MessageType: w.Type,
			Producer: "explore", OccurredAt: now, IdempotencyKey: w.Key, AggregateType: "agg", AggregateID: w.Agg,
			AggregateVersion: &v, Payload: data}
		if w.MaxAttempts > 0 || w.NotBefore > 0 {
			env.AttemptPolicy = &envelope.AttemptPolicy{MaxBusinessAttempts: w.MaxAttempts}
			if w.NotBefore > 0 {
				nb := now.Add(w.NotBefore)
				env.AttemptPolicy.NotBefore = &nb
			}
		}
		body, err = envelope.Encode(env)
	}
	if err != nil {
		return message{}, err
	}
	m.body = string(body)
	return m, nil
}

// widOf reads the work id out of any body the explorer sends (an SNS
// notification carries it escaped).
var widOf = regexp.MustCompile(`\\?"wid\\?"\s*:\s*\\?"(w[0-9]+)\\?"`)

func bodyWID(body string) string {
	if m := widOf.FindStringSubmatch(body); m != nil {
		return m[1]
	}
	return ""
}
